-- Up Migration
-- The CHECK constraints repeat the contract's field rules so that a row written by any path
-- (the service, a manual INSERT, a future writer) obeys them too. The service validates first and
-- gives the friendly message; these are the last line.
CREATE TABLE users (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  email         text        NOT NULL,
  name          text        NOT NULL,
  phone         text,
  password_hash text,
  created_at    timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT users_email_key UNIQUE (email),
  CONSTRAINT users_email_format CHECK (
    char_length(email) <= 254 AND email = lower(email) AND email ~ '^[^@[:space:]]+@[^@[:space:]]+\.[^@[:space:]]+$'
  ),
  CONSTRAINT users_name_format CHECK (
    char_length(name) BETWEEN 1 AND 200 AND name !~ '[[:cntrl:]]'
  ),
  CONSTRAINT users_phone_format CHECK (phone ~ '^\+[0-9]{6,15}$'),
  CONSTRAINT users_password_hash_format CHECK (
    char_length(password_hash) <= 255 AND password_hash ~ '^\$[a-z0-9-]+\$'
  )
);

-- Down Migration
DROP TABLE users;
