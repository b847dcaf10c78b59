import { SECRET_COLUMN } from '../user-columns.js';
import { MAX_RECORD_CHARS } from './stream-parse.js';

// What is kept of an item set aside: never a password, never more than a streamed line may hold,
// never a character PostgreSQL cannot store. A password is found by the parsed item's keys (any
// depth, any case, however escaped), never by its text, and so is a hash's field holding no hash; a
// record that did not parse has no keys: only where it was and its length are kept.

export const REDACTED = '[redacted]';
/** Characters of an item kept at most (a streamed line's bound); a longer one is kept cut. */
export const MAX_KEPT_CHARS = MAX_RECORD_CHARS;
/** Problems kept an item, and characters of a field's name in one. */
const MAX_KEPT_ERRORS = 100;
const MAX_KEPT_FIELD_CHARS = 256;

const HASH = SECRET_COLUMN.schema;
const HASH_PATTERN = new RegExp(HASH.pattern, 'u');
const HASH_KEY = SECRET_COLUMN.field.toLowerCase();

/** @typedef {{ item: string, truncated: boolean }} KeptText */

/** String.prototype.toWellFormed, which TypeScript's ES2022 library lacks. @param {string} s */
const wellFormed = (s) =>
  /** @type {{ toWellFormed(): string }} */ (/** @type {unknown} */ (s)).toWellFormed();

/** No NUL, no lone surrogate (each becomes U+FFFD): text PostgreSQL stores. @param {string} s */
const storable = (s) => wellFormed(s).replaceAll('\0', '\uFFFD');

/** @param {unknown} value */
const isHash = (value) =>
  typeof value === 'string' &&
  value.length <= HASH.maxLength &&
  HASH_PATTERN.test(value) &&
  wellFormed(value) === value;

/**
 * A key whose value is not kept: `password` in its name (any case), but for the hash's field
 * holding a hash. @param {string} key @param {unknown} value
 */
function isSecret(key, value) {
  const lower = key.toLowerCase();
  return lower.includes('password') && !(lower === HASH_KEY && isHash(value));
}

/** At any depth, without recursion (a body may nest deeply). @param {unknown} value */
export function holdsSecret(value) {
  const pending = [value];
  while (pending.length > 0) {
    const v = pending.pop();
    if (v === null || typeof v !== 'object') continue;
    if (Array.isArray(v)) {
      for (const inner of v) pending.push(inner);
      continue;
    }
    for (const [key, inner] of Object.entries(v)) {
      if (isSecret(key, inner)) return true;
      pending.push(inner);
    }
  }
  return false;
}

/** JSON.stringify's replacer. @param {string} key @param {unknown} value */
const redacting = (key, value) => (key !== '' && isSecret(key, value) ? REDACTED : value);

/** Text kept: storable, cut past MAX_KEPT_CHARS. @param {string} text @returns {KeptText} */
function bounded(text) {
  const truncated = text.length > MAX_KEPT_CHARS;
  return { item: storable(truncated ? text.slice(0, MAX_KEPT_CHARS) : text), truncated };
}

/**
 * An item that parsed as JSON: `text` as sent when the item holds no secret, else its JSON with
 * each secret's value replaced. @param {unknown} value @param {string} [text] @returns {KeptText}
 */
export function keptJson(value, text) {
  if (text !== undefined && !holdsSecret(value)) return bounded(text);
  let json;
  try {
    json = JSON.stringify(value, redacting) ?? String(value);
  } catch {
    // Nested deeper than JSON.stringify goes: nothing of it can be shown.
    return { item: '[not kept: nested too deeply]', truncated: true };
  }
  return bounded(json);
}

/**
 * A CSV record that parsed: as sent when it holds no secret, else written again from its fields
 * (each quoted) with each secret's value replaced. @returns {KeptText}
 * @param {Record<string, string>} user @param {readonly string[]} columns @param {string} text
 */
export function keptCsv(user, columns, text) {
  if (!holdsSecret(user)) return bounded(text);
  const fields = columns.map((c) => {
    const value = Object.hasOwn(user, c) ? user[c] : undefined;
    if (value === undefined) return '';
    return `"${(isSecret(c, value) ? REDACTED : value).replaceAll('"', '""')}"`;
  });
  return bounded(fields.join(','));
}

/** @param {number} line @param {string} text @returns {KeptText} */
export const keptUnreadable = (line, text) => ({
  item: `[not kept: line ${line}, ${text.length} characters]`,
  truncated: false,
});

/**
 * An item's problems as kept (jsonb): the first MAX_KEPT_ERRORS, each storable, a field's name cut.
 * @param {import('../errors.js').ItemError[]} errors
 */
export function keptErrors(errors) {
  return JSON.stringify(errors.slice(0, MAX_KEPT_ERRORS), (key, value) =>
    typeof value === 'string'
      ? storable(key === 'field' ? value.slice(0, MAX_KEPT_FIELD_CHARS) : value)
      : value,
  );
}
