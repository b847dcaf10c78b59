import { runStatement } from '../db/statement.js';
import { InvalidBatchError } from '../errors.js';
import { keptJson } from './kept-item.js';
import { keepStatements } from './quarantine-sql.js';
import { MAX_REPORTED_ERRORS, checkUser } from './user-schema.js';

// The items a request with `Prefer: invalid=quarantine` sets aside, kept in quarantined_items by
// the transaction that writes its valid users: once a client scope, so a retry keeps nothing twice,
// and within the scope's bound in bytes, past which its items are refused.

/** @import { ItemError, Lending, QuarantinedItem } from './quarantine-types.js' */
/** @import { QuarantineReason, QuarantineRequest, UserRow } from './quarantine-types.js' */

/** @type {readonly QuarantineReason[]} */
export const QUARANTINE_REASONS = ['invalid_user', 'malformed_json', 'malformed_csv'];

/** Invalid items a request may set aside when its Prefer header names no bound. */
export const DEFAULT_MAX_INVALID = 100;
/** The largest bound a client may set (`max-invalid`). */
export const MAX_INVALID_LIMIT = 10_000;
/** Characters of set-aside items a stream may hold until it keeps them; past it, it is refused. */
export const QUARANTINE_HOLD_CHARS = 1024 * 1024;
/** Past it, a stream keeps its items at its next chunk's end (not a statement a chunk). */
export const QUARANTINE_KEEP_CHARS = 256 * 1024;
/**
 * @param {number} invalid @param {number} received @param {number} maxInvalid
 * @param {ItemError[]} errors @param {boolean} [complete]
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

/** One request's set-aside items; `items`: those not yet kept (a stream keeps them as it goes). */
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

  byReason() {
    return this.reasons;
  }

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

/** What each scope's rows hold, as last read (at most once in USAGE_TTL_MS) and added to since. */
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
 * Held until the request is answered: a writer may roll its transaction back and try again.
 * @param {Lending} client @param {Quarantine} quarantine
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

/** @param {Quarantine} quarantine @param {number} bytes */
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
 * again). @param {Lending} client @param {Quarantine} quarantine
 */
export async function keepQuarantinedSoFar(client, quarantine) {
  await keepQuarantined(client, quarantine);
  quarantine.kept();
}

/**
 * A JSON array's items checked one by one: the valid ones' rows in the order sent, the invalid ones
 * set aside; past the bound, a 400 (nothing written, nothing kept). `duplicateKeys`: the items that
 * give a key twice, invalid whatever they hold. @returns {UserRow[]}
 * @param {unknown[]} items @param {Quarantine} quarantine @param {ItemError[]} [duplicateKeys]
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
    // Described whole: a kept item keeps all its problems.
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
