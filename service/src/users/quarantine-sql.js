import { lastResult } from '../db/transaction-settings.js';
import { keptErrors } from './kept-item.js';

// The quarantined_items table's statements, each beside its decoder: what a request keeps, the
// background purge's batch, and what `npm run quarantine` lists, exports and purges.

/** @import { Answer, ItemCount, ItemFilters, KeptBatch } from './quarantine-types.js' */
/** @import { KeptRow, ScopeBytes, Statement } from './quarantine-types.js' */

// An item's key: its format, CSV header and text. An item twice in one request is kept once, at its
// first place (ON CONFLICT DO UPDATE meets a row once a statement), in the order sent; a row this
// transaction wrote already is left as it is, so times_seen counts requests, not statements.
const ITEM_SHA256 =
  `sha256(convert_to($1 || E'\\n' || ` + `coalesce($2, '') || E'\\n' || i.item, 'UTF8'))`;
const INSERT_QUARANTINED = `INSERT INTO quarantined_items AS kept (client_scope, client,
  request_id, client_request_id, format, csv_header, item_sha256, position, line, reason, errors,
  item, truncated)
SELECT $9, $10, $11, $12, $1, $2, o.item_sha256, o.position, o.line, o.reason, o.errors, o.item,
  o.truncated
FROM (
  SELECT DISTINCT ON (s.item_sha256) s.*
  FROM (
    SELECT i.*, ${ITEM_SHA256} AS item_sha256
    FROM unnest($3::integer[], $4::integer[], $5::text[], $6::jsonb[], $7::text[], $8::boolean[])
    AS i(position, line, reason, errors, item, truncated)
  ) s
  ORDER BY s.item_sha256, s.position
) o
ORDER BY o.position
ON CONFLICT ON CONSTRAINT quarantined_items_once DO UPDATE SET
  client = EXCLUDED.client, request_id = EXCLUDED.request_id,
  client_request_id = EXCLUDED.client_request_id,
  received_at = EXCLUDED.received_at, position = EXCLUDED.position, line = EXCLUDED.line,
  reason = EXCLUDED.reason, errors = EXCLUDED.errors, times_seen = kept.times_seen + 1
WHERE kept.request_id <> EXCLUDED.request_id OR kept.received_at <> EXCLUDED.received_at`;

// A row weighs its item's and errors' bytes and ROW_BYTES more (its other columns), so that many
// small items count too.
const ROW_BYTES = 200;
const NEW_ROWS_BYTES = `(SELECT
       coalesce(sum(octet_length(i.item) + octet_length(i.errors::text) + ${ROW_BYTES}), 0)
     FROM unnest($3::text[], $4::jsonb[]) AS i(item, errors)
     WHERE NOT EXISTS (SELECT FROM quarantined_items k WHERE k.client_scope = $5
     AND k.item_sha256 = ${ITEM_SHA256}))`;
const NEW_BYTES = `SELECT ${NEW_ROWS_BYTES} AS new`;
const SCOPE_BYTES = `SELECT ${NEW_ROWS_BYTES} AS new,
  (SELECT coalesce(sum(row_bytes + ${ROW_BYTES}), 0) FROM quarantined_items
    WHERE client_scope = $5) AS total`;

/** @param {Answer} answer @returns {ScopeBytes} */
function scopeBytesOf(answer) {
  const [row] = lastResult(answer).rows;
  return { added: Number(row.new), held: Number(row.total) };
}

/**
 * `size`: the bytes a batch's new rows add to its scope's, and what the scope holds unless `held`
 * is known; `keep`: the batch kept (an item kept already for the scope updated, not kept twice).
 * @param {KeptBatch} batch @param {number | undefined} held
 * @returns {{ size: Statement<ScopeBytes>, keep: Statement<void> }}
 */
export function keepStatements(batch, held) {
  const { format, csvHeader, items, scope } = batch;
  const texts = items.map((i) => i.item);
  const errors = items.map((i) => keptErrors(i.errors));
  return {
    size: {
      text: held === undefined ? SCOPE_BYTES : NEW_BYTES,
      values: [format, csvHeader, texts, errors, scope],
      decode:
        held === undefined
          ? scopeBytesOf
          : (answer) => ({ added: Number(lastResult(answer).rows[0].new), held }),
    },
    keep: {
      text: INSERT_QUARANTINED,
      values: [
        format,
        csvHeader,
        items.map((i) => i.position),
        items.map((i) => i.line),
        items.map((i) => i.reason),
        errors,
        texts,
        items.map((i) => i.truncated),
        scope,
        batch.client,
        batch.requestId,
        batch.clientRequestId,
      ],
      operation: 'INSERT',
      decode: () => undefined,
    },
  };
}

/**
 * The background purge's batch, oldest first, skipping rows a writer holds; without parameters, so
 * settings go before it. @param {number} retentionDays @param {number} batchRows
 * @returns {Statement<number>}
 */
export const purgeOldBatch = (retentionDays, batchRows) => ({
  text: `DELETE FROM quarantined_items WHERE id IN (
    SELECT id FROM quarantined_items
    WHERE received_at < now() - interval '${Math.trunc(retentionDays)} days'
    ORDER BY received_at LIMIT ${Math.trunc(batchRows)} FOR UPDATE SKIP LOCKED)`,
  decode: (answer) => lastResult(answer).rowCount ?? 0,
});

// `npm run quarantine`'s statements (scripts/quarantine.js), each after the filters it was given.

/** A client as a scope (its credential's kind), not a name. @param {string} client */
const isScope = (client) => client === 'anonymous' || /^(token|jwt|unscoped):/.test(client);

/**
 * @param {ItemFilters} filters @param {string} [first] @param {unknown[]} [firstValues]
 * @returns {[string, unknown[]]}
 */
function where({ client, request, since, until }, first, firstValues = []) {
  const conditions = first ? [first] : [];
  const values = [...firstValues];
  for (const [sql, value] of /** @type {[string, unknown][]} */ ([
    [client !== undefined && isScope(client) ? 'client_scope = $' : 'client = $', client],
    ['request_id = $', request],
    ['received_at >= $', since],
    ['received_at < $', until],
  ])) {
    if (value === undefined) continue;
    values.push(value);
    conditions.push(`${sql}${values.length}`);
  }
  return [conditions.length ? `WHERE ${conditions.join(' AND ')}` : '', values];
}

/**
 * The items counted by day (UTC), client scope and reason, newest day first.
 * @param {ItemFilters} filters @returns {Statement<ItemCount[]>}
 */
export function countItems(filters) {
  const [clause, values] = where(filters);
  return {
    text: `SELECT to_char(received_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, client_scope
    AS client, reason, count(*)::int AS items
     FROM quarantined_items ${clause} GROUP BY 1, 2, 3 ORDER BY 1 DESC, 2, 3`,
    values,
    decode: (answer) => lastResult(answer).rows,
  };
}

/** @param {any} row @returns {KeptRow} */
const keptRowOf = (row) => ({
  id: row.id,
  client: row.client,
  clientScope: row.client_scope,
  requestId: row.request_id,
  clientRequestId: row.client_request_id,
  receivedAt: row.received_at,
  format: row.format,
  position: row.position,
  line: row.line,
  reason: row.reason,
  errors: row.errors,
  item: row.item,
  truncated: row.truncated,
  csvHeader: row.csv_header,
});

/**
 * A page of at most `limit` items after `after` (an id), in id order: a keyset, so that an export
 * holds one page at a time however many there are. @returns {Statement<KeptRow[]>}
 * @param {ItemFilters} filters @param {string} after @param {number} limit
 */
export function itemPage(filters, after, limit) {
  const [clause, values] = where(filters, `id > $1`, [after]);
  return {
    text: `SELECT id, client, client_scope, request_id, client_request_id, received_at, format,
        position, line, reason, errors, item, truncated, csv_header
      FROM quarantined_items ${clause} ORDER BY id LIMIT ${Math.trunc(limit)}`,
    values,
    decode: (answer) => lastResult(answer).rows.map(keptRowOf),
  };
}

/**
 * Deletes the items kept before `olderThan`, or those of `request` (with `client`, only that
 * client's). @param {{ olderThan?: Date, request?: string, client?: string }} filters
 * @returns {Statement<number>}
 */
export function deleteItems({ olderThan, request, client }) {
  const [clause, values] = where({ client, request, until: olderThan });
  return {
    text: `DELETE FROM quarantined_items ${clause}`,
    values,
    decode: (answer) => lastResult(answer).rowCount ?? 0,
  };
}
