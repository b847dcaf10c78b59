-- Up Migration
-- quarantined_items, scoped and bounded. `client_scope` is the credential's kind and name
-- (`token:crm`, `jwt:billing`, `anonymous`), as Idempotency-Keys are scoped: an item is one row a
-- scope, so a JWT whose subject is a token client's name never updates that client's rows. Rows
-- kept before it have no known kind: their scope is `unscoped:` and their client's name, which no
-- credential has. `request_id` is now an id the service made; the client's own X-Request-Id, when
-- it sent one, is `client_request_id`, never a key. `truncated`: the item was longer than a
-- streamed line may be and is kept cut. `row_bytes` (its item's and errors' bytes), in the
-- scope's index, is what a client's rows hold, summed there against its bound; `received_at` is
-- when the item was last sent, which the service's purge goes by.
ALTER TABLE quarantined_items
  ADD COLUMN client_scope text,
  ADD COLUMN client_request_id text,
  ADD COLUMN truncated boolean NOT NULL DEFAULT false,
  ADD COLUMN row_bytes integer
    GENERATED ALWAYS AS (octet_length(item) + octet_length(errors::text)) STORED;
UPDATE quarantined_items SET client_scope = 'unscoped:' || client;
ALTER TABLE quarantined_items
  ALTER COLUMN client_scope SET NOT NULL,
  DROP CONSTRAINT quarantined_items_once,
  ADD CONSTRAINT quarantined_items_once UNIQUE (client_scope, item_sha256) INCLUDE (row_bytes);
-- list and purge by a client's name (any kind).
CREATE INDEX quarantined_items_client ON quarantined_items (client);

-- Down Migration
DROP INDEX quarantined_items_client;
ALTER TABLE quarantined_items DROP CONSTRAINT quarantined_items_once;
DELETE FROM quarantined_items k USING quarantined_items o
  WHERE o.client = k.client AND o.item_sha256 = k.item_sha256 AND o.id < k.id;
ALTER TABLE quarantined_items
  ADD CONSTRAINT quarantined_items_once UNIQUE (client, item_sha256),
  DROP COLUMN row_bytes,
  DROP COLUMN truncated,
  DROP COLUMN client_request_id,
  DROP COLUMN client_scope;
