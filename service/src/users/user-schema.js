import { Ajv } from 'ajv';
import { InvalidBatchError } from '../errors.js';
import { compareChanges, isRealDateTime } from './changed-at.js';
import { ORDER_COLUMN, REQUIRED_FIELDS, USER_COLUMNS, USER_FIELDS } from '../user-columns.js';

/** @typedef {import('../errors.js').ItemError} ItemError */
/** @typedef {import('../user-columns.js').UserRow} UserRow */
/** An item the schema passed: every field a string, the optional ones perhaps absent. @typedef {{ [F in keyof UserRow]: null extends UserRow[F] ? string | undefined : string }} UserItem */
/**
 * What to do with an email already stored: ignore (skip it) or merge (update it with what was sent).
 * @typedef {'ignore' | 'merge'} Resolution
 */

export const MAX_REPORTED_ERRORS = 100;

const userSchema = {
  type: 'object',
  required: REQUIRED_FIELDS,
  additionalProperties: false,
  properties: Object.fromEntries(USER_COLUMNS.map((c) => [c.field, c.schema])),
};

// What each rule means to someone sending users, by field and ajv keyword.
const MESSAGES = /** @type {Record<import('../user-columns.js').UserField, Readonly<Record<string, string>>>} */ (/** @type {unknown} */ (Object.fromEntries(USER_COLUMNS.map((c) => [c.field, c.messages]))));
const TOO_PRECISE = 'has more than 6 fractional digits: PostgreSQL keeps microseconds, so it could not be stored as sent (round it at the source)';
const NOT_A_DATE = 'must be a date and time that exist (month 01-12, a day the month has, hour 00-23, minute and second 00-59) with an offset PostgreSQL takes (at most ±15:59; real ones are within -12:00 and +14:00)';
const TOO_PRECISE_PATTERN = /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{7,}(Z|[+-][0-9]{2}:[0-9]{2})$/;
const PASSWORD_REFUSED = 'plaintext passwords are never accepted: hash it (argon2id, bcrypt, scrypt) and send passwordHash';
const LONE_SURROGATE = 'contains a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape), which cannot be stored as sent';
const UNKNOWN_FIELD = `is not a known field (allowed: ${USER_FIELDS.join(', ')})`;
/** The fields stored as text: each must be well-formed UTF-16 to be stored as sent. */
const TEXT_FIELDS = USER_COLUMNS.filter((c) => c.type === 'text').map((c) => c.field);
/** The fields stored as timestamptz: each must name a date and time that exist. */
const TIMESTAMP_FIELDS = USER_COLUMNS.filter((c) => c.type === 'timestamptz').map((c) => /** @type {const} */ ([c.field, new RegExp(c.schema.pattern, 'u')]));
// The email, the key (declared first), is the one value not stored as sent (lower-cased): its
// rules apply again to it as stored.
const EMAIL = USER_COLUMNS[0];
const MAX_EMAIL_LENGTH = EMAIL.schema.maxLength;
const EMAIL_PATTERN = new RegExp(EMAIL.schema.pattern, 'u');

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
      return { index, field, message: field === 'password' ? PASSWORD_REFUSED : UNKNOWN_FIELD };
    }
    if (e.instancePath === '') {
      return { index, field: null, message: 'each item must be a user object' };
    }
    const field = e.instancePath.slice(1);
    if (e.keyword === 'pattern' && TIMESTAMP_FIELDS.some(([f]) => f === field) && TOO_PRECISE_PATTERN.test(/** @type {Record<string, string>} */ (item)[field])) {
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
  for (const field of TEXT_FIELDS) {
    const value = item[field];
    if (typeof value === 'string' && !isWellFormed(value)) found.push({ index, field, message: LONE_SURROGATE });
  }
  for (const [field, pattern] of TIMESTAMP_FIELDS) {
    const value = item[field];
    if (typeof value === 'string' && pattern.test(value) && !isRealDateTime(value)) found.push({ index, field, message: NOT_A_DATE });
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
 * An item that passed the schema as its row (null where not sent), or null when a value could not be
 * stored as sent: a text that is not well-formed UTF-16, a date and time that do not exist, an email
 * that breaks a rule once lower-cased. Written out a column (tsc holds it to UserRow, so to the
 * declaration): one object shape and plain property reads on the hot path.
 * @param {UserItem} u
 * @returns {UserRow | null}
 */
function storedRow(u) {
  const email = u.email.toLowerCase();
  if (!isWellFormed(u.email) || (email !== u.email && !emailStillFits(email))) return null;
  const name = u.name;
  if (!isWellFormed(name)) return null;
  const phone = u.phone ?? null;
  if (phone !== null && !isWellFormed(phone)) return null;
  const passwordHash = u.passwordHash ?? null;
  if (passwordHash !== null && !isWellFormed(passwordHash)) return null;
  const changedAt = u.changedAt ?? null;
  if (changedAt !== null && !isRealDateTime(changedAt)) return null;
  return { email, name, phone, passwordHash, changedAt };
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
    if (!Array.isArray(checked)) {
      rows.push(checked);
      continue;
    }
    invalidItems++;
    problems.push(...checked);
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
 * @returns {UserRow | ItemError[]}  a row, or an error list (an array: empty or holding objects)
 */
export function checkUser(item, index, describeProblems = true) {
  if (validateUser(item)) {
    // The common case, a property read and a check a field.
    const row = storedRow(/** @type {UserItem} */ (item));
    if (row !== null) return row;
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
    while (end < rows.length && rows[end].email === rows[i].email) end++;
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
  if (run.some((r) => r[ORDER] !== null)) run.sort((a, b) => compareChanges(a[ORDER], b[ORDER]));
  let m = run[0];
  for (let i = 1; i < run.length; i++) m = laterOver(m, run[i]);
  return m;
}

/**
 * A later change of a row over an earlier one, each column as its declaration's `merge` says: the
 * later's value, or for `kept` (phone, passwordHash) the later's where sent, else the earlier's.
 * @param {UserRow} m @param {UserRow} r
 * @returns {UserRow}
 */
function laterOver(m, r) {
  return { email: r.email, name: r.name, phone: r.phone ?? m.phone, passwordHash: r.passwordHash ?? m.passwordHash, changedAt: r.changedAt };
}

/** The field of the ordering value (changedAt), by which an email's changes are applied. */
const ORDER = ORDER_COLUMN.field;

/** @param {UserRow} a @param {UserRow} b */
export const byEmail = (a, b) => (a.email < b.email ? -1 : a.email > b.email ? 1 : 0);

// For the OpenAPI document (openapi.js), which is generated from the very schema ajv compiles.
export { userSchema, MESSAGES, UNKNOWN_FIELD };
