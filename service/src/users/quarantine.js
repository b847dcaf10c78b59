import { runStatement } from '../db/statement.js';
import { InvalidBatchError } from '../errors.js';
import { keptJson } from './kept-item.js';
import { keepStatements } from './quarantine-sql.js';
import { MAX_REPORTED_ERRORS, checkUser } from './user-schema.js';

// The items a request with `Prefer: invalid=quarantine` sets aside: collected while its body is
// checked (a Quarantine), refused whole past its bound, and kept in quarantined_items by the
// transaction that writes its valid users. What is kept of an item is kept-item.js's (no password,
// bounded, storable); an item is kept once a client scope (keyed by its SHA-256), so a retry, or
// the same users posted again in other chunks, keeps nothing twice: the row then names the latest
// request. A client's rows are bounded in all (their bytes), past which its items are refused. The
// statements are quarantine-sql.js's.

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

/**
 * Keeps a request's set-aside items, on the connection of its transaction (which a writer may roll
 * back and try again, so they are held until the request is answered).
 * @param {import('../db/lending.js').Lending} client @param {Quarantine} quarantine
 */
export async function keepQuarantined(client, quarantine) {
  if (quarantine.items.length === 0) return;
  const { scope, bound } = quarantine;
  const known = bound.usage.get(scope);
  const { size, keep } = keepStatements(quarantine, known);
  const { added, held } = await runStatement(client, size);
  if (known === undefined) bound.usage.read(scope, held);
  if (held + added > bound.maxBytes) throw clientFull(quarantine, held + added);
  await runStatement(client, keep);
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
