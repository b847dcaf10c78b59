-- Up Migration
-- What a write under an Idempotency-Key stores is its outcome (the counts, the rows written, the
-- items set aside) and what the request needs to render its answer from it, as JSON text (json,
-- not jsonb: a replay renders the same bytes only if the keys keep their order). A row is complete
-- once its fingerprint is set. status, headers and body hold the answers stored before this
-- migration, replayed as they are until they expire.
ALTER TABLE idempotency_keys ADD COLUMN outcome json;

-- Down Migration
ALTER TABLE idempotency_keys DROP COLUMN outcome;
