-- Up Migration
-- The items a request with `Prefer: invalid=quarantine` set aside: kept in the transaction that
-- writes the request's valid users, so an item is either written or kept here, never both.
-- `item` is the item as sent (its JSON, its NDJSON line or its CSV record), a plaintext password's
-- value replaced before it gets here; `csv_header` the header of a CSV body, to read a record again.
-- An item is one row a client (`item_sha256`: of its format, CSV header and text), so a retry of a
-- request, or the same users posted again in other chunks (a queue's redelivery), keeps nothing
-- twice: the row then names the latest request that sent it, where and when, and `times_seen` counts
-- the requests.
CREATE TABLE quarantined_items (
  id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  client       text        NOT NULL,
  request_id   text        NOT NULL,
  received_at  timestamptz NOT NULL DEFAULT now(),
  format       text        NOT NULL,
  item_sha256  bytea       NOT NULL,
  times_seen   integer     NOT NULL DEFAULT 1,
  position     integer     NOT NULL,
  line         integer,
  reason       text        NOT NULL,
  errors       jsonb       NOT NULL,
  item         text        NOT NULL,
  csv_header   text,
  CONSTRAINT quarantined_items_once UNIQUE (client, item_sha256),
  CONSTRAINT quarantined_items_format CHECK (format IN ('json', 'ndjson', 'csv')),
  CONSTRAINT quarantined_items_reason CHECK (reason IN ('invalid_user', 'malformed_json', 'malformed_csv'))
);
-- export and purge by time, list by day.
CREATE INDEX quarantined_items_received_at ON quarantined_items (received_at);
CREATE INDEX quarantined_items_request_id ON quarantined_items (request_id);

-- Down Migration
DROP TABLE quarantined_items;
