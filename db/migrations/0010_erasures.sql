-- Up Migration
-- A tombstone a person erased: a keyed hash of the email (HMAC-SHA-256 under ERASURE_KEY, which the
-- database never holds) and when the erasure happened (its changedAt, or the time it was asked
-- for). Nothing else of the person is kept. A later write of the email is stored only when it is a
-- strictly newer change; every write states its emails' hashes and asserts that none is stale.
CREATE TABLE erasures (
  email_hmac bytea       NOT NULL,
  erased_at  timestamptz NOT NULL,
  CONSTRAINT erasures_pkey PRIMARY KEY (email_hmac),
  CONSTRAINT erasures_hmac_length CHECK (octet_length(email_hmac) = 32)
);

-- The assertion's failure, called only when a write names an erased email it may not bring back:
-- the writer learns which rows from its own SQLSTATE, looks them up and writes the rest.
CREATE FUNCTION sluice_erased_email_written() RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  RAISE EXCEPTION 'a write names an erased email, not as a newer change'
    USING ERRCODE = 'SL001';
END
$$;

-- Down Migration
DROP FUNCTION sluice_erased_email_written();
DROP TABLE erasures;
