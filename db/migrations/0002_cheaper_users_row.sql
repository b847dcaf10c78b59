-- Up Migration
-- A cheaper row for PostgreSQL, measured with the database alone (`npm run bench:db`: 1000-row
-- INSERTs over 4 connections on an en-US ICU database; figures in the README):
--   * email in COLLATE "C": the unique index compares bytes instead of running the ICU collator.
--     Emails are stored lower-cased, so byte order is also their right meaning. Equality (and so
--     uniqueness) is unchanged: ICU collations in PostgreSQL are deterministic.
--   * email is the primary key, and the surrogate `id` goes: nothing reads it (the API never
--     returns it), and its identity sequence plus a second B-tree whose right-most page every
--     concurrent insert fights over cost about a fifth of the insert rate.
--   * the CHECK constraints stay a last line against other writers, without a regular expression
--     per row (their character classes follow the collation): lengths, the '@', lower case, and the
--     first character of phone and password_hash. The service still validates every rule exactly.
--     0001's four cost about a quarter of the insert rate; these cost about a tenth.
-- The existing rows are kept; their ids are not.
ALTER TABLE users
  DROP CONSTRAINT users_email_format,
  DROP CONSTRAINT users_name_format,
  DROP CONSTRAINT users_phone_format,
  DROP CONSTRAINT users_password_hash_format,
  DROP COLUMN id;

ALTER TABLE users ALTER COLUMN email TYPE text COLLATE "C";
ALTER TABLE users DROP CONSTRAINT users_email_key;
ALTER TABLE users ADD CONSTRAINT users_pkey PRIMARY KEY (email);

-- Byte lengths (octet_length reads the length word; char_length walks the string) at four bytes a
-- character, so that every value the service accepts passes; LIKE instead of left() or strpos()
-- (no allocation). lower() stays: it keeps two spellings of one email from being stored twice.
ALTER TABLE users
  ADD CONSTRAINT users_email_format CHECK (octet_length(email) <= 1016 AND email LIKE '_%@_%' AND email = lower(email)),
  ADD CONSTRAINT users_name_format CHECK (octet_length(name) BETWEEN 1 AND 800),
  ADD CONSTRAINT users_phone_format CHECK (octet_length(phone) BETWEEN 7 AND 16 AND phone LIKE '+%'),
  ADD CONSTRAINT users_password_hash_format CHECK (octet_length(password_hash) <= 1020 AND password_hash LIKE '$%');

-- Down Migration
ALTER TABLE users
  DROP CONSTRAINT users_email_format,
  DROP CONSTRAINT users_name_format,
  DROP CONSTRAINT users_phone_format,
  DROP CONSTRAINT users_password_hash_format,
  DROP CONSTRAINT users_pkey;
ALTER TABLE users ALTER COLUMN email TYPE text COLLATE "default";
ALTER TABLE users ADD CONSTRAINT users_email_key UNIQUE (email);
-- New ids: the old ones were dropped with the column.
ALTER TABLE users ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY;
ALTER TABLE users
  ADD CONSTRAINT users_email_format CHECK (
    char_length(email) <= 254 AND email = lower(email) AND email ~ '^[^@[:space:]]+@[^@[:space:]]+\.[^@[:space:]]+$'
  ),
  ADD CONSTRAINT users_name_format CHECK (char_length(name) BETWEEN 1 AND 200 AND name !~ '[[:cntrl:]]'),
  ADD CONSTRAINT users_phone_format CHECK (phone ~ '^\+[0-9]{6,15}$'),
  ADD CONSTRAINT users_password_hash_format CHECK (char_length(password_hash) <= 255 AND password_hash ~ '^\$[a-z0-9-]+\$');
