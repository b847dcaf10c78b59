import { createHash } from 'node:crypto';
import { InvalidBatchError } from '../errors.js';
import { MAX_REPORTED_ERRORS, checkUser } from './user-schema.js';

// The items a request with `Prefer: invalid=quarantine` sets aside: collected while its body is
// checked (a Quarantine), refused whole past its bound, and kept in quarantined_items by the
// transaction that writes its valid users. A plaintext password's value is replaced before an item
// is kept; a replay of the same body by the same client keeps nothing twice (the body's SHA-256 and
// the item's position are its key).

/** @typedef {import('../errors.js').ItemError} ItemError */
/** Why an item was set aside. @typedef {'invalid_user' | 'malformed_json' | 'malformed_csv'} QuarantineReason */
/** The body's format. @typedef {'json' | 'ndjson' | 'csv'} QuarantineFormat */
/** @typedef {{ position: number, line: number | null, reason: QuarantineReason, errors: ItemError[], item: string }} QuarantinedItem */

/** @type {readonly QuarantineReason[]} */
export const QUARANTINE_REASONS = ['invalid_user', 'malformed_json', 'malformed_csv'];

/** Invalid items a request may set aside when its Prefer header names no bound. */
export const DEFAULT_MAX_INVALID = 100;
/** The largest bound a client may set (`max-invalid`). */
export const MAX_INVALID_LIMIT = 10_000;
/** Characters of set-aside items a streamed body may hold until its end, past which it is refused as over its bound. */
export const QUARANTINE_HOLD_CHARS = 1024 * 1024;
/** The client of a request that needed no credentials, as its set-aside items name it. */
export const ANONYMOUS_CLIENT = 'anonymous';
/** What replaces a plaintext password's value. */
export const REDACTED = '[redacted]';

const PASSWORD = 'password';

/** JSON.stringify's replacer: a `password` key's value (any case, any depth) replaced. @param {string} key @param {unknown} value */
const withoutPasswords = (key, value) => (key.toLowerCase() === PASSWORD ? REDACTED : value);

/** An item that parsed, as JSON text without a password's value; `text` kept as sent when it holds none. @param {unknown} value @param {string} [text] */
export function keptJson(value, text) {
  if (text !== undefined && !text.toLowerCase().includes(PASSWORD)) return text;
  return JSON.stringify(value, withoutPasswords) ?? String(value);
}

/**
 * Text that is not JSON, kept as sent but for what follows each `"password"` key: its value (a
 * string, whole or cut, or whatever runs to the next `,` `}` or `]`) replaced.
 * @param {string} text
 */
export function keptText(text) {
  if (!text.toLowerCase().includes(PASSWORD)) return text;
  return text.replace(/("password"\s*:\s*)("(?:[^"\\]|\\.)*"?|[^,}\]]*)/giu, `$1"${REDACTED}"`);
}

/** The refusal of a request past its bound: nothing written, nothing kept. @param {number} invalid @param {number} received @param {number} maxInvalid @param {ItemError[]} errors @param {boolean} [complete] */
export function overBound(invalid, received, maxInvalid, errors, complete = true) {
  const some = complete ? `${invalid} of ${received}` : `at least ${invalid} of the first ${received}`;
  return new InvalidBatchError(`${some} users are invalid, more than the ${maxInvalid} Prefer: invalid=quarantine sets aside (max-invalid); nothing was written`, errors);
}

/**
 * The items one request sets aside, at most `maxInvalid`; `errors`: the first MAX_REPORTED_ERRORS
 * problems, as a 400 names them. `fingerprint(text)` feeds the body's digest.
 */
export class Quarantine {
  /** @param {{ client: string, requestId: string, format: QuarantineFormat, maxInvalid: number }} request */
  constructor({ client, requestId, format, maxInvalid }) {
    this.client = client;
    this.requestId = requestId;
    this.format = format;
    this.maxInvalid = maxInvalid;
    /** @type {QuarantinedItem[]} */
    this.items = [];
    /** @type {ItemError[]} */
    this.errors = [];
    /** @type {string | null} the CSV header's columns, joined by commas */
    this.csvHeader = null;
    this.heldChars = 0;
    this.digest = createHash('sha256');
  }

  /** @param {string} text  a piece of the body, in order */
  fingerprint(text) {
    this.digest.update(text);
  }

  get count() {
    return this.items.length;
  }

  /** How many of each reason. @returns {Partial<Record<QuarantineReason, number>>} */
  byReason() {
    const counts = /** @type {Partial<Record<QuarantineReason, number>>} */ ({});
    for (const { reason } of this.items) counts[reason] = (counts[reason] ?? 0) + 1;
    return counts;
  }

  /** Past the bound (count, or for a stream the characters it holds). */
  get isOver() {
    return this.items.length > this.maxInvalid || this.heldChars > QUARANTINE_HOLD_CHARS;
  }

  /** @param {QuarantinedItem} item */
  add(item) {
    this.items.push(item);
    this.heldChars += item.item.length;
    for (const e of item.errors) if (this.errors.length < MAX_REPORTED_ERRORS) this.errors.push(e);
  }

  /** The kept rows' parameters, once the body is all read (the digest is final). */
  #values() {
    const body = this.digest.digest();
    const { items } = this;
    return [this.client, this.requestId, this.format, body, this.csvHeader,
      items.map((i) => i.position), items.map((i) => i.line), items.map((i) => i.reason), items.map((i) => JSON.stringify(i.errors)), items.map((i) => i.item)];
  }

  /** The statement that keeps them, ON CONFLICT DO NOTHING: a replay keeps nothing twice. */
  statement() {
    return { text: INSERT_QUARANTINED, values: this.#values(), operation: 'INSERT' };
  }
}

const INSERT_QUARANTINED = `INSERT INTO quarantined_items (client, request_id, format, body_sha256, csv_header, position, line, reason, errors, item)
SELECT $1, $2, $3, $4, $5, i.position, i.line, i.reason, i.errors, i.item
FROM unnest($6::integer[], $7::integer[], $8::text[], $9::jsonb[], $10::text[]) AS i(position, line, reason, errors, item)
ON CONFLICT ON CONSTRAINT quarantined_items_once DO NOTHING`;

/** Keeps a request's set-aside items, on the connection of its transaction. @param {import('../db/lending.js').Lending} client @param {Quarantine} quarantine */
export async function keepQuarantined(client, quarantine) {
  if (quarantine.count > 0) await client.query(quarantine.statement());
}

/**
 * A JSON array's items checked one by one: the valid ones' rows in the order sent, the invalid ones
 * set aside; past the bound, the refusal a 400 gives today (nothing written, nothing kept).
 * @param {unknown[]} items @param {Quarantine} quarantine @returns {import('./user-schema.js').UserRow[]}
 */
export function setAsideInvalid(items, quarantine) {
  const rows = [];
  const errors = /** @type {ItemError[]} */ ([]);
  let invalid = 0;
  for (let i = 0; i < items.length; i++) {
    // Described whole: a kept item keeps all its problems, the answer names the first 100.
    const checked = checkUser(items[i], i);
    if (!Array.isArray(checked)) {
      rows.push(checked);
      continue;
    }
    invalid++;
    for (const e of checked) if (errors.length < MAX_REPORTED_ERRORS) errors.push(e);
    if (invalid <= quarantine.maxInvalid) quarantine.add({ position: i, line: null, reason: 'invalid_user', errors: checked, item: keptJson(items[i]) });
  }
  if (invalid > quarantine.maxInvalid) throw overBound(invalid, items.length, quarantine.maxInvalid, errors);
  if (invalid > 0) quarantine.fingerprint(JSON.stringify(items));
  return rows;
}
