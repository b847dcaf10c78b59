import { InvalidBatchError } from '../errors.js';
import { keptErrors, keptJson } from './kept-item.js';
import { MAX_REPORTED_ERRORS, checkUser } from './user-schema.js';

// The items a request with `Prefer: invalid=quarantine` sets aside: collected while its body is
// checked (a Quarantine), refused whole past its bound, and kept in quarantined_items by the
// transaction that writes its valid users. What is kept of an item is kept-item.js's (no password,
// bounded, storable); an item is kept once a client scope (keyed by its SHA-256), so a retry, or
// the same users posted again in other chunks, keeps nothing twice: the row then names the latest
// request. A client's rows are bounded in all (their bytes), past which its items are refused.

/** @typedef {import('../errors.js').ItemError} ItemError */
/**
 * Why an item was set aside.
 * @typedef {'invalid_user' | 'malformed_json' | 'malformed_csv'} QuarantineReason
 */
/** The body's format. @typedef {'json' | 'ndjson' | 'csv'} QuarantineFormat */
/**
 * item, truncated: kept-item.js's.
 * @typedef {{ position: number, line: number | null, reason: QuarantineReason, errors: ItemError[],
 *   item: string, truncated: boolean }} QuarantinedItem
 */
/**
 * Whose and which request: `client` the credential's name (shown), `scope` its kind and name (the
 * key, http/authenticate.js); `requestId` made by the service, `clientRequestId` the client's
 * X-Request-Id (kept beside, never a key); `bound` what a scope's rows may hold in all.
 * @typedef {{ client: string, scope: string, requestId: string, clientRequestId?: string,
 *   format: QuarantineFormat, maxInvalid: number, bound: ClientBound }} QuarantineRequest
 */
/**
 * What a scope's rows may hold in all (QUARANTINE_CLIENT_MAX_BYTES), and what each holds as this
 * process last read it (one per process, shared by its requests).
 * @typedef {{ maxBytes: number, usage: ScopeUsage }} ClientBound
 */

/** @type {readonly QuarantineReason[]} */
export const QUARANTINE_REASONS = ['invalid_user', 'malformed_json', 'malformed_csv'];

/** Invalid items a request may set aside when its Prefer header names no bound. */
export const DEFAULT_MAX_INVALID = 100;
/** The largest bound a client may set (`max-invalid`). */
export const MAX_INVALID_LIMIT = 10_000;
/**
 * Characters of set-aside items a streamed body may hold before it keeps them (ignore mode: at each
 * chunk's end; merge mode: at its end), past which it is refused as over its bound.
 */
export const QUARANTINE_HOLD_CHARS = 1024 * 1024;
/**
 * Characters of set-aside items past which a stream keeps them at its next chunk's end (fewer round
 * trips than a statement a chunk).
 */
export const QUARANTINE_KEEP_CHARS = 256 * 1024;
/**
 * The refusal of a request past its bound: nothing written, nothing kept.
 * @param {number} invalid
 * @param {number} received
 * @param {number} maxInvalid
 * @param {ItemError[]} errors
 * @param {boolean} [complete]
 */
export function overBound(invalid, received, maxInvalid, errors, complete = true) {
  const some = complete
    ? `${invalid} of ${received}`
    : `at least ${invalid} of the first ${received}`;
  return new InvalidBatchError(
    `${some} users are invalid, more than the ${maxInvalid} Prefer: ` +
      `invalid=quarantine sets aside (max-invalid); nothing was written`,
    errors,
  );
}

/**
 * The items one request sets aside, at most `maxInvalid`: `count` in all, `items` those not yet
 * kept (a stream keeps them as it goes); `errors`: the first MAX_REPORTED_ERRORS problems, as a 400
 * names them.
 */
export class Quarantine {
  /** @param {QuarantineRequest} request */
  constructor({ client, scope, requestId, clientRequestId, format, maxInvalid, bound }) {
    this.client = client;
    this.scope = scope;
    this.requestId = requestId;
    this.clientRequestId = clientRequestId ?? null;
    this.format = format;
    this.maxInvalid = maxInvalid;
    this.bound = bound;
    /** @type {QuarantinedItem[]} */
    this.items = [];
    /** @type {ItemError[]} */
    this.errors = [];
    /** @type {string | null} the CSV header's columns, joined by commas */
    this.csvHeader = null;
    this.count = 0;
    this.heldChars = 0;
    /** @type {Partial<Record<QuarantineReason, number>>} */
    this.reasons = {};
  }

  /** How many of each reason. */
  byReason() {
    return this.reasons;
  }

  /** Past the bound (count, or the characters held). */
  get isOver() {
    return this.count > this.maxInvalid || this.heldChars > QUARANTINE_HOLD_CHARS;
  }

  /** @param {QuarantinedItem} item */
  add(item) {
    this.items.push(item);
    this.count++;
    this.reasons[item.reason] = (this.reasons[item.reason] ?? 0) + 1;
    this.heldChars += item.item.length;
    for (const e of item.errors) if (this.errors.length < MAX_REPORTED_ERRORS) this.errors.push(e);
  }

  /** The items held were kept: let them go. */
  kept() {
    this.items = [];
    this.heldChars = 0;
  }

  /** The kept rows' parameters. */
  #values() {
    const { items } = this;
    return [
      this.format,
      this.csvHeader,
      items.map((i) => i.position),
      items.map((i) => i.line),
      items.map((i) => i.reason),
      items.map((i) => keptErrors(i.errors)),
      items.map((i) => i.item),
      items.map((i) => i.truncated),
      this.scope,
      this.client,
      this.requestId,
      this.clientRequestId,
    ];
  }

  /**
   * The statements that keep them: `size` reads the bytes their new rows add to the scope's (and,
   * given `withTotal`, what the scope holds); `keep` keeps them (an item already kept for the
   * scope is updated, not kept twice).
   * @param {boolean} withTotal
   */
  statements(withTotal) {
    const values = this.#values();
    return {
      size: {
        text: withTotal ? SCOPE_BYTES : NEW_BYTES,
        values: [...values.slice(0, 2), values[6], values[5], this.scope],
      },
      keep: { text: INSERT_QUARANTINED, values, operation: 'INSERT' },
    };
  }
}

/**
 * What each scope's rows hold, as last read (or read and since added to by this process), for
 * USAGE_TTL_MS: the sum over a scope's rows is read at most once in that time, however often a
 * client near its bound sends; rows kept by other processes meanwhile are seen at the next read.
 */
export class ScopeUsage {
  /** @type {Map<string, { bytes: number, readAt: number }>} */
  #scopes = new Map();

  /** @param {string} scope @returns {number | undefined} */
  get(scope) {
    const known = this.#scopes.get(scope);
    return known && performance.now() - known.readAt < USAGE_TTL_MS ? known.bytes : undefined;
  }

  /** @param {string} scope @param {number} bytes */
  read(scope, bytes) {
    this.#scopes.delete(scope);
    if (this.#scopes.size >= USAGE_SCOPES)
      this.#scopes.delete(this.#scopes.keys().next().value ?? '');
    this.#scopes.set(scope, { bytes, readAt: performance.now() });
  }

  /** @param {string} scope @param {number} bytes */
  add(scope, bytes) {
    const known = this.#scopes.get(scope);
    if (known) known.bytes += bytes;
  }
}

const USAGE_TTL_MS = 10_000;
const USAGE_SCOPES = 10_000;

// An item's key: its format, CSV header and text. An item twice in one request is kept once (its
// first place), as ON CONFLICT DO UPDATE may meet a row only once a statement; new rows in the
// order sent, so that an export lists them so. A row this request's transaction wrote already (a
// stream keeps its items in several statements: same request id, same now()) is left as it is, so
// times_seen counts requests, not statements.
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
// small items count too. What a scope holds is read on the index of its rows, and so is which
// items are new.
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

/**
 * Keeps a request's set-aside items, on the connection of its transaction (which a writer may roll
 * back and try again, so they are held until the request is answered).
 * @param {import('../db/lending.js').Lending} client @param {Quarantine} quarantine
 */
export async function keepQuarantined(client, quarantine) {
  if (quarantine.items.length === 0) return;
  const { scope, bound } = quarantine;
  const known = bound.usage.get(scope);
  const { size, keep } = quarantine.statements(known === undefined);
  const [sized] = (await client.query(size)).rows;
  const held = known ?? Number(sized.total);
  if (known === undefined) bound.usage.read(scope, held);
  const added = Number(sized.new);
  if (held + added > bound.maxBytes) throw clientFull(quarantine, held + added);
  await client.query(keep);
  bound.usage.add(scope, added);
}

/**
 * The refusal of items past their client's bound: nothing written, nothing kept.
 * @param {Quarantine} quarantine
 * @param {number} bytes
 */
function clientFull(quarantine, bytes) {
  return new InvalidBatchError(
    `this client's quarantine would hold ${bytes} bytes, over ` +
      `QUARANTINE_CLIENT_MAX_BYTES (${quarantine.bound.maxBytes}): the invalid ` +
      `users are refused, not kept, until its items are purged; nothing was written`,
    quarantine.errors,
  );
}

/**
 * Keeps a stream's items held so far and lets them go (a stream's transaction is never tried
 * again).
 * @param {import('../db/lending.js').Lending} client
 * @param {Quarantine} quarantine
 */
export async function keepQuarantinedSoFar(client, quarantine) {
  await keepQuarantined(client, quarantine);
  quarantine.kept();
}

/**
 * A JSON array's items checked one by one: the valid ones' rows in the order sent, the invalid ones
 * set aside; past the bound, the refusal a 400 gives today (nothing written, nothing kept).
 * `duplicateKeys`: the items that give a key twice (the JSON parser found them), invalid whatever
 * they hold.
 * @param {unknown[]} items
 * @param {Quarantine} quarantine
 * @param {ItemError[]} [duplicateKeys]
 * @returns {import('./user-schema.js').UserRow[]}
 */
export function setAsideInvalid(items, quarantine, duplicateKeys = []) {
  const rows = [];
  /** @type {ItemError[]} */
  const errors = [];
  /** @type {Map<number, ItemError[]>} */
  const twice = new Map();
  for (const e of duplicateKeys) twice.set(e.index, [...(twice.get(e.index) ?? []), e]);
  let invalid = 0;
  for (let i = 0; i < items.length; i++) {
    // Described whole: a kept item keeps all its problems, the answer names the first 100.
    const checked = twice.get(i) ?? checkUser(items[i], i);
    if (!Array.isArray(checked)) {
      rows.push(checked);
      continue;
    }
    invalid++;
    for (const e of checked) if (errors.length < MAX_REPORTED_ERRORS) errors.push(e);
    if (invalid <= quarantine.maxInvalid)
      quarantine.add({
        position: i,
        line: null,
        reason: 'invalid_user',
        errors: checked,
        ...keptJson(items[i]),
      });
  }
  if (invalid > quarantine.maxInvalid)
    throw overBound(invalid, items.length, quarantine.maxInvalid, errors);
  return rows;
}
