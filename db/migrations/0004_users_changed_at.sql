-- Up Migration
-- The ordering value of merge mode: when the change a row holds happened at its source (an item's
-- `changedAt`), NULL when the change carried none. A merge replaces a row only with a strictly newer
-- change, so an older one delivered late (at-least-once queues, retries) never goes back in time.
-- Nullable without a default: adding it rewrites no row, and every stored row keeps meaning
-- "no ordering value yet" (any change that carries one beats it).
ALTER TABLE users ADD COLUMN changed_at timestamptz;

-- Down Migration
ALTER TABLE users DROP COLUMN changed_at;
