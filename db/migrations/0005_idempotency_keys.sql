-- Up Migration
-- Idempotency-Key (POST /users): each key a client used, with the fingerprint of its request and
-- the answer it got, written in the same transaction as the request's rows, so a committed write
-- always has its answer and a write that did not commit never does. A row is claimed (fingerprint
-- and answer NULL) at the start of that transaction and completed before its COMMIT: a row read
-- by another transaction is always complete. expires_at: from when the key may be used again;
-- the service purges expired rows in small batches, in the order of this index.
CREATE TABLE idempotency_keys (
  client      text COLLATE "C" NOT NULL,
  key         text COLLATE "C" NOT NULL,
  expires_at  timestamptz NOT NULL,
  fingerprint bytea,
  status      smallint,
  headers     jsonb,
  body        text,
  CONSTRAINT idempotency_keys_pkey PRIMARY KEY (client, key),
  CONSTRAINT idempotency_keys_key_length CHECK (octet_length(key) BETWEEN 1 AND 255)
);
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);

-- Down Migration
DROP TABLE idempotency_keys;
