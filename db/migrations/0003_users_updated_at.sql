-- Up Migration
-- Merge mode (`Prefer: resolution=merge-duplicates`) updates stored users: updated_at records when a
-- merge last changed a row, NULL until then (so an insert sets nothing, and a row's RETURNING tells
-- an insert from an update). Nullable without a default: adding it rewrites no row, and created_at
-- keeps meaning when the row was first written.
ALTER TABLE users ADD COLUMN updated_at timestamptz;

-- Down Migration
ALTER TABLE users DROP COLUMN updated_at;
