-- Up Migration
-- A tombstone a person erased: keyed hashes of the email (the database never holds the key,
-- ERASURE_KEY) and when the erasure happened (its changedAt, or the time it was asked for).
-- Nothing else of the person is kept. `email_hmac` (HMAC-SHA-256) names the email; `email_tag`
-- (32 bits of SipHash-2-4 under a key derived from the same secret) lets a process tell the
-- emails that may be erased from the many that are not without a cryptographic hash each;
-- `generation` orders the erasures (each takes the next, under its lock) so that a process knows
-- which tombstones it has not read yet.
CREATE SEQUENCE erasures_generation;

CREATE TABLE erasures (
  email_hmac bytea       NOT NULL,
  email_tag  integer     NOT NULL,
  erased_at  timestamptz NOT NULL,
  generation bigint      NOT NULL,
  CONSTRAINT erasures_pkey PRIMARY KEY (email_hmac),
  CONSTRAINT erasures_hmac_length CHECK (octet_length(email_hmac) = 32)
);
CREATE INDEX erasures_generation_idx ON erasures (generation);

-- The assertion's failure, called only when a write may bring back an erased email, or meets a
-- tombstone its process has not read: the writer learns why from its SQLSTATE, reads what it
-- missed, and writes again without what an erasure keeps out.
CREATE FUNCTION sluice_erased_email_written() RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION 'a write may bring back an erased email'
    USING ERRCODE = 'SL001';
END
$$;

-- Down Migration
DROP FUNCTION sluice_erased_email_written();
DROP TABLE erasures;
DROP SEQUENCE erasures_generation;
