import { Ajv } from 'ajv';
import { InvalidBatchError } from '../errors.js';
import { compareChanges, isRealDateTime } from './changed-at.js';

/** @typedef {import('../errors.js').ItemError} ItemError */
/** @typedef {{ email: string, name: string, phone?: string, passwordHash?: string, changedAt?: string }} User */
/**
 * A row as the table takes it: [email (lower-cased), name, phone, password_hash, changed_at (as
 * sent: RFC 3339 with an offset)]; null: not sent.
 * @typedef {[string, string, string | null, string | null, string | null]} UserRow
 */
/**
 * What to do with an email already stored: ignore (skip it) or merge (update it with what was sent).
 * @typedef {'ignore' | 'merge'} Resolution
 */

export const MAX_REPORTED_ERRORS = 100;

// Control characters (C0, DEL, C1): invisible in logs and UIs, and NUL cannot be stored in text.
const NO_CONTROL = '^[^\\u0000-\\u001f\\u007f-\\u009f]*$';
// One character of an address: no whitespace, no @, no control character.
const EMAIL_CHAR = '[^\\s@\\u0000-\\u001f\\u007f-\\u009f]';
// local@domain.tld, with a dot inside the domain found by a lookahead: the same addresses as
// `X+@X+\.X+`, whose backtracking takes time quadratic in the length of a domain of dots that is
// wrong only at its end (one 100,000-character email held the event loop for 22 s; ajv runs the
// pattern even when the length is already over). This form is linear.
const EMAIL = `^${EMAIL_CHAR}+@${EMAIL_CHAR}(?=${EMAIL_CHAR}*\\.${EMAIL_CHAR})${EMAIL_CHAR}*$`;
// PHC strings and modular crypt: `$id$`, then base64 (standard or crypt's), parameters and separators.
// Nothing else, so no quote, backslash, space, control character or NUL ever reaches a statement.
const PASSWORD_HASH = '^\\$[a-z0-9-]+\\$[A-Za-z0-9./+=,$-]*$';
// When the change happened at its source, merge mode's ordering value: RFC 3339's date-time with an
// offset (Z or ±hh:mm), to the microsecond at most. PostgreSQL's timestamptz keeps microseconds, so
// a seventh digit could not be stored as sent: refused, not rounded. Whether the date exists (a
// 30 February, an hour 24) is checked after the schema (calendarProblem).
const CHANGED_AT = '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\\.[0-9]{1,6})?(Z|[+-][0-9]{2}:[0-9]{2})$';

const userSchema = {
  type: 'object',
  required: ['email', 'name'],
  additionalProperties: false,
  properties: {
    email: { type: 'string', maxLength: 254, pattern: EMAIL },
    name: { type: 'string', minLength: 1, maxLength: 200, pattern: NO_CONTROL },
    phone: { type: 'string', pattern: '^\\+[0-9]{6,15}$' },
    passwordHash: { type: 'string', maxLength: 255, pattern: PASSWORD_HASH },
    changedAt: { type: 'string', pattern: CHANGED_AT },
  },
};

// What each rule means to someone sending users, by field and ajv keyword.
const MESSAGES = {
  email: { type: 'must be a string', maxLength: 'must be at most 254 characters', pattern: 'must be a plausible email address (local@domain.tld)' },
  name: { type: 'must be a string', minLength: 'must not be empty', maxLength: 'must be at most 200 characters', pattern: 'must not contain control characters (NUL included)' },
  phone: { type: 'must be a string (leave the field out when there is none)', pattern: 'must be + followed by 6 to 15 digits' },
  passwordHash: { type: 'must be a string (leave the field out when there is none)', maxLength: 'must be at most 255 characters', pattern: 'must be a PHC / modular-crypt hash: $id$ then only letters, digits and . / + = , $ - (e.g. $argon2id$v=19$...)' },
  changedAt: { type: 'must be a string', pattern: 'must be an RFC 3339 date-time with an offset, to the microsecond at most (e.g. 2026-11-26T09:30:00.123456Z or 2026-11-26T10:30:00+01:00)' },
};
const TOO_PRECISE = 'has more than 6 fractional digits: PostgreSQL keeps microseconds, so it could not be stored as sent (round it at the source)';
const NOT_A_DATE = 'must be a date and time that exist (month 01-12, a day the month has, hour 00-23, minute and second 00-59) with an offset PostgreSQL takes (at most ±15:59; real ones are within -12:00 and +14:00)';
const TOO_PRECISE_PATTERN = /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{7,}(Z|[+-][0-9]{2}:[0-9]{2})$/;
const PASSWORD_REFUSED = 'plaintext passwords are never accepted: hash it (argon2id, bcrypt, scrypt) and send passwordHash';
const LONE_SURROGATE = 'contains a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape), which cannot be stored as sent';
const FIELDS = /** @type {const} */ (['email', 'name', 'phone', 'passwordHash']);
const MAX_EMAIL_LENGTH = userSchema.properties.email.maxLength;
const EMAIL_PATTERN = new RegExp(EMAIL, 'u');
const CHANGED_AT_PATTERN = new RegExp(CHANGED_AT, 'u');

// Compiled once: the compiled function is plain JavaScript, about a microsecond a user.
const validateUser = new Ajv({ allErrors: true, strict: true, unicodeRegExp: true }).compile(userSchema);

/**
 * Turns ajv's findings about one item into the contract's error entries.
 * @param {number} index
 * @param {import('ajv').ErrorObject[]} errors
 * @param {unknown} item  the item they are about
 * @returns {ItemError[]}
 */
function describe(index, errors, item) {
  return errors.map((e) => {
    if (e.keyword === 'required') {
      return { index, field: e.params.missingProperty, message: 'is required' };
    }
    if (e.keyword === 'additionalProperties') {
      const field = e.params.additionalProperty;
      return { index, field, message: field === 'password' ? PASSWORD_REFUSED : 'is not a known field (allowed: email, name, phone, passwordHash, changedAt)' };
    }
    if (e.instancePath === '') {
      return { index, field: null, message: 'each item must be a user object' };
    }
    const field = e.instancePath.slice(1);
    if (field === 'changedAt' && e.keyword === 'pattern' && TOO_PRECISE_PATTERN.test(/** @type {{ changedAt: string }} */ (item).changedAt)) {
      return { index, field, message: TOO_PRECISE };
    }
    const byField = /** @type {Record<string, Record<string, string>>} */ (MESSAGES)[field];
    return { index, field, message: byField?.[e.keyword] ?? e.message ?? 'is invalid' };
  });
}

/**
 * The rules apply to the value as stored, which is not always the value as sent: a lone surrogate
 * would be stored as U+FFFD, and an email is stored lower-cased, which can lengthen it ('İ' becomes
 * 'i' and a combining dot). Cheap when nothing is wrong: isWellFormed is constant time on one-byte
 * strings, and an email is checked again only when lower-casing changed it.
 * @param {number} index
 * @param {Record<string, unknown>} item
 * @returns {ItemError[] | null}  null: nothing wrong
 */
function storageProblems(index, item) {
  /** @type {ItemError[]} */
  const found = [];
  for (const field of FIELDS) {
    const value = item[field];
    if (typeof value === 'string' && !isWellFormed(value)) found.push({ index, field, message: LONE_SURROGATE });
  }
  if (typeof item.changedAt === 'string' && CHANGED_AT_PATTERN.test(item.changedAt) && !isRealDateTime(item.changedAt)) {
    found.push({ index, field: 'changedAt', message: NOT_A_DATE });
  }
  // The email as stored is checked whatever another field holds: every field's problem is named.
  const email = item.email;
  if (typeof email === 'string' && !found.some((e) => e.field === 'email')) {
    const problem = emailAsStoredProblem(email);
    if (problem !== null) found.push({ index, field: 'email', message: problem });
  }
  return found.length > 0 ? found : null;
}

/**
 * What is wrong with an email once lower-cased, as it is stored, when the email as sent passed
 * (so one problem is not said twice); null: nothing.
 * @param {string} email
 */
function emailAsStoredProblem(email) {
  const stored = email.toLowerCase();
  if (stored === email) return null;
  if (!fitsEmailLength(stored) && fitsEmailLength(email)) {
    return `must be at most ${MAX_EMAIL_LENGTH} characters once lower-cased, as it is stored (some letters lower-case to two characters)`;
  }
  if (!EMAIL_PATTERN.test(stored) && EMAIL_PATTERN.test(email)) return 'must be a plausible email address once lower-cased, as it is stored';
  return null;
}

/** @param {User} u  already valid by the schema */
function wellFormed(u) {
  for (const field of FIELDS) {
    const value = u[field];
    if (value !== undefined && !isWellFormed(value)) return false;
  }
  return true;
}

/** String.prototype.isWellFormed (Node 20), which TypeScript's ES2022 library does not declare. @param {string} s */
const isWellFormed = (s) => /** @type {{ isWellFormed(): boolean }} */ (/** @type {unknown} */ (s)).isWellFormed();

/** @param {string} stored  a lower-cased email whose sent form passed the schema */
function emailStillFits(stored) {
  return fitsEmailLength(stored) && EMAIL_PATTERN.test(stored);
}

/** At most MAX_EMAIL_LENGTH code points; counted only when the UTF-16 length says it may not. @param {string} s */
function fitsEmailLength(s) {
  return s.length <= MAX_EMAIL_LENGTH || codePoints(s) <= MAX_EMAIL_LENGTH;
}

/** @param {string} s  characters as the contract and PostgreSQL count them (code points) */
function codePoints(s) {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/**
 * Checks every item of a batch against the contract and, when all pass, returns the rows to write:
 * emails lower-cased, each email once, sorted by email so that concurrent overlapping batches take
 * their row locks in the same order and cannot deadlock. An email sent twice is written once, as if
 * the items had been applied in order: ignore keeps the first; merge gives the later item's name,
 * and its phone and password hash where it has them.
 *
 * @param {unknown[]} items  the parsed body, already known to be a non-empty array
 * @param {Resolution} [resolution]
 * @returns {UserRow[]}
 * @throws {InvalidBatchError} naming up to 100 problems, in index order
 */
export function parseUserBatch(items, resolution = 'ignore') {
  return oncePerEmail(checkUserBatch(items), resolution);
}

/**
 * Every item of a batch checked against the contract: a row an item, in the order sent (emails
 * lower-cased, repeats kept), when all pass.
 * @param {unknown[]} items
 * @returns {UserRow[]}
 * @throws {InvalidBatchError} naming up to 100 problems, in index order
 */
export function checkUserBatch(items) {
  /** @type {ItemError[]} */
  const problems = [];
  let invalidItems = 0;
  /** @type {UserRow[]} */
  const rows = [];
  for (let i = 0; i < items.length; i++) {
    const checked = checkUser(items[i], i, problems.length < MAX_REPORTED_ERRORS);
    if (Array.isArray(checked) && typeof checked[0] === 'string') {
      rows.push(/** @type {UserRow} */ (checked));
      continue;
    }
    invalidItems++;
    problems.push(.../** @type {ItemError[]} */ (checked));
  }
  if (invalidItems > 0) {
    const errors = problems.slice(0, MAX_REPORTED_ERRORS);
    throw new InvalidBatchError(`${invalidItems} of ${items.length} users are invalid; nothing was written`, errors);
  }
  return rows;
}

/**
 * One item checked against the contract: its row (email lower-cased) when it passes, else what is
 * wrong with it. The one validator of every body format (a JSON array, NDJSON, CSV).
 * @param {unknown} item
 * @param {number} index  the item's place in the body, for the error entries
 * @param {boolean} [describeProblems]  false: an invalid item gives [] (counted, not described)
 * @returns {UserRow | ItemError[]}  a row starts with a string; an error list is empty or holds objects
 */
export function checkUser(item, index, describeProblems = true) {
  if (validateUser(item)) {
    // The common case, kept to a few property reads: stored as sent, and the email fits lower-cased.
    const u = /** @type {User} */ (item);
    const email = u.email.toLowerCase();
    const changedAt = u.changedAt ?? null;
    if (wellFormed(u) && (email === u.email || emailStillFits(email)) && (changedAt === null || isRealDateTime(changedAt))) {
      return [email, u.name, u.phone ?? null, u.passwordHash ?? null, changedAt];
    }
  }
  if (!describeProblems) return [];
  const schemaErrors = validateUser(item) ? [] : describe(index, validateUser.errors ?? [], item);
  const storeErrors = item !== null && typeof item === 'object' ? storageProblems(index, /** @type {Record<string, unknown>} */ (item)) : null;
  // One message a field: a rule of the schema it breaks already says what to fix.
  const notYetSaid = (storeErrors ?? []).filter((e) => !schemaErrors.some((s) => s.field === e.field));
  return [...schemaErrors, ...notYetSaid];
}

/**
 * Sorted by email, each email once. The sort is stable, so the occurrences of an email stay in the
 * order they were sent. Ignore mode keeps an email's first item. Merge mode applies an email's items
 * in the order of their changes: those without changedAt first, in the order sent (an item without
 * the value is older than any with one, as against a stored row), then by changedAt, a tie going to
 * the later line; each takes the name sent, and the phone and hash where it has them.
 * @param {UserRow[]} rows @param {Resolution} resolution
 */
export function oncePerEmail(rows, resolution) {
  if (rows.length > 1) rows.sort(byEmail);
  let kept = 0;
  for (let i = 0; i < rows.length;) {
    let end = i + 1;
    while (end < rows.length && rows[end][0] === rows[i][0]) end++;
    // kept <= i: a run is read before its place is written.
    rows[kept++] = end - i === 1 || resolution !== 'merge' ? rows[i] : merged(rows.slice(i, end));
    i = end;
  }
  rows.length = kept;
  return rows;
}

/**
 * One email's items, merged in the order of their changes.
 * @param {UserRow[]} run  in the order sent
 * @returns {UserRow}
 */
function merged(run) {
  // Stable: a tie keeps the order sent.
  if (run.some((r) => r[4] !== null)) run.sort((a, b) => compareChanges(a[4], b[4]));
  let m = run[0];
  for (let i = 1; i < run.length; i++) {
    const r = run[i];
    m = [r[0], r[1], r[2] ?? m[2], r[3] ?? m[3], r[4]];
  }
  return m;
}

/** @param {UserRow} a @param {UserRow} b */
export const byEmail = (a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);

// For the OpenAPI document (openapi.js), which is generated from the very schema ajv compiles.
export { userSchema, MESSAGES };
