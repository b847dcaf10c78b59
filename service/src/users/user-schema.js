import { Ajv } from 'ajv';
import { InvalidBatchError } from '../errors.js';
import { compareChanges, isRealDateTime } from './changed-at.js';
import {
  KEPT_FIELDS,
  KEY_COLUMN,
  ORDER_COLUMN,
  REQUIRED_FIELDS,
  SECRET_COLUMN,
  USER_COLUMNS,
  USER_FIELDS,
} from '../user-columns.js';

// The one validator of every body format: ajv's schema built from the declaration
// (user-columns.js), its findings in the contract's words, the rules applied again to a value as
// stored, and the rows to write, each email once, sorted so that writers lock in one order.

/** @import { ItemError, Resolution, UserItem } from './write-types.js' */
/** @typedef {import('../user-columns.js').UserRow} UserRow */

export const MAX_REPORTED_ERRORS = 100;

const userSchema = {
  type: 'object',
  required: REQUIRED_FIELDS,
  additionalProperties: false,
  properties: Object.fromEntries(USER_COLUMNS.map((c) => [c.field, c.schema])),
};

const MESSAGES =
  /** @type {Record<import('../user-columns.js').UserField, Readonly<Record<string, string>>>} */ (
    /** @type {unknown} */ (Object.fromEntries(USER_COLUMNS.map((c) => [c.field, c.messages])))
  );
const TOO_PRECISE =
  'has more than 6 fractional digits: PostgreSQL keeps microseconds, ' +
  'so it could not be stored as sent (round it at the source)';
const NOT_A_DATE =
  'must be a date and time that exist (month 01-12, a day the month ' +
  'has, hour 00-23, minute and second 00-59) with an offset PostgreSQL ' +
  'takes (at most ±15:59; real ones are within -12:00 and +14:00)';
const TOO_PRECISE_PATTERN =
  /^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{7,}(Z|[+-][0-9]{2}:[0-9]{2})$/;
const PASSWORD_REFUSED =
  'plaintext passwords are never accepted: hash it ' +
  `(argon2id, bcrypt, scrypt) and send ${SECRET_COLUMN.field}`;
const LONE_SURROGATE =
  'contains a lone UTF-16 surrogate (an unpaired ' +
  '\\ud800-\\udfff escape), which cannot be stored as sent';
const UNKNOWN_FIELD = `is not a known field (allowed: ${USER_FIELDS.join(', ')})`;
const TEXT_FIELDS = USER_COLUMNS.filter((c) => c.type === 'text').map((c) => c.field);
const TIMESTAMP_FIELDS = USER_COLUMNS.filter((c) => c.type === 'timestamptz').map(
  (c) => /** @type {const} */ ([c.field, new RegExp(c.schema.pattern, 'u')]),
);
// The key is the one value stored otherwise than sent, lower-cased: its rules apply again.
const KEY = KEY_COLUMN.field;
const MAX_EMAIL_LENGTH = KEY_COLUMN.schema.maxLength;
const EMAIL_PATTERN = new RegExp(KEY_COLUMN.schema.pattern, 'u');

const validateUser = new Ajv({ allErrors: true, strict: true, unicodeRegExp: true }).compile(
  userSchema,
);

/**
 * ajv's findings about one item as the contract's error entries. @returns {ItemError[]}
 * @param {number} index @param {import('ajv').ErrorObject[]} errors @param {unknown} item
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
    if (
      e.keyword === 'pattern' &&
      TIMESTAMP_FIELDS.some(([f]) => f === field) &&
      TOO_PRECISE_PATTERN.test(/** @type {Record<string, string>} */ (item)[field])
    ) {
      return { index, field, message: TOO_PRECISE };
    }
    const byField = /** @type {Record<string, Record<string, string>>} */ (MESSAGES)[field];
    return { index, field, message: byField?.[e.keyword] ?? e.message ?? 'is invalid' };
  });
}

// The rules apply to the value as stored: a lone surrogate would be stored as U+FFFD, and
// lower-casing can lengthen an email ('İ' becomes 'i' and a combining dot).
/** @param {number} index @param {Record<string, unknown>} item @returns {ItemError[] | null} */
function storageProblems(index, item) {
  /** @type {ItemError[]} */
  const found = [];
  for (const field of TEXT_FIELDS) {
    const value = item[field];
    if (typeof value === 'string' && !isWellFormed(value))
      found.push({ index, field, message: LONE_SURROGATE });
  }
  for (const [field, pattern] of TIMESTAMP_FIELDS) {
    const value = item[field];
    if (typeof value === 'string' && pattern.test(value) && !isRealDateTime(value))
      found.push({ index, field, message: NOT_A_DATE });
  }
  const key = item[KEY];
  if (typeof key === 'string' && !found.some((e) => e.field === KEY)) {
    const problem = emailAsStoredProblem(key);
    if (problem !== null) found.push({ index, field: KEY, message: problem });
  }
  return found.length > 0 ? found : null;
}

/** What is wrong with an email once lower-cased when it passed as sent. @param {string} sent */
function emailAsStoredProblem(sent) {
  const stored = sent.toLowerCase();
  if (stored === sent) return null;
  if (!fitsEmailLength(stored) && fitsEmailLength(sent)) {
    return (
      `must be at most ${MAX_EMAIL_LENGTH} characters once lower-cased, ` +
      `as it is stored (some letters lower-case to two characters)`
    );
  }
  if (!EMAIL_PATTERN.test(stored) && EMAIL_PATTERN.test(sent))
    return 'must be a plausible email address once lower-cased, as it is stored';
  return null;
}

/** String.prototype.isWellFormed, which TypeScript's ES2022 library lacks. @param {string} s */
const isWellFormed = (s) =>
  /** @type {{ isWellFormed(): boolean }} */ (/** @type {unknown} */ (s)).isWellFormed();

function emailStillFits(/** @type {string} */ stored) {
  return fitsEmailLength(stored) && EMAIL_PATTERN.test(stored);
}

/** Code points counted only when the UTF-16 length may be over. @param {string} s */
function fitsEmailLength(s) {
  return s.length <= MAX_EMAIL_LENGTH || codePoints(s) <= MAX_EMAIL_LENGTH;
}

function codePoints(/** @type {string} */ s) {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

const FIELDS = USER_COLUMNS.map((c) => c.field);
/** Whether a value sent can be stored as sent, by its column's type. */
const STORABLE = USER_COLUMNS.map((c) =>
  c.type === 'timestamptz' ? isRealDateTime : isWellFormed,
);
/** A row before its values: every field, in the declaration's order (one shape for every row). */
const NOT_SENT = Object.fromEntries(FIELDS.map((f) => [f, null]));

/**
 * An item that passed the schema as its row (null where not sent), or null when a value could not
 * be stored as sent. @param {UserItem} u @returns {UserRow | null}
 */
function storedRow(u) {
  // The item passed the schema: its fields are the declaration's, laid over the template so that
  // every row has one shape.
  /** @type {Record<string, string | null | undefined>} */
  const row = { ...NOT_SENT, ...u };
  for (let i = 0; i < FIELDS.length; i++) {
    const value = row[FIELDS[i]];
    if (value != null && !STORABLE[i](value)) return null;
  }
  const sent = /** @type {string} */ (row[KEY]);
  const stored = sent.toLowerCase();
  if (stored !== sent) {
    if (!emailStillFits(stored)) return null;
    row[KEY] = stored;
  }
  return /** @type {UserRow} */ (row);
}

/**
 * A batch's rows to write when every item passes, else an InvalidBatchError naming its problems.
 * @param {unknown[]} items @param {Resolution} [resolution] @returns {UserRow[]}
 */
export function parseUserBatch(items, resolution = 'ignore') {
  return oncePerEmail(checkUserBatch(items), resolution);
}

/**
 * A row an item, in the order sent, repeats kept, when all pass; else an InvalidBatchError.
 * @param {unknown[]} items @returns {UserRow[]}
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
    throw new InvalidBatchError(
      `${invalidItems} of ${items.length} users are invalid; nothing was written`,
      errors,
    );
  }
  return rows;
}

/**
 * One item's row when it passes, else what is wrong with it ([] when not `describeProblems`).
 * @param {unknown} item @param {number} index @param {boolean} [describeProblems]
 * @returns {UserRow | ItemError[]}
 */
export function checkUser(item, index, describeProblems = true) {
  if (validateUser(item)) {
    const row = storedRow(/** @type {UserItem} */ (item));
    if (row !== null) return row;
  }
  if (!describeProblems) return [];
  const schemaErrors = validateUser(item) ? [] : describe(index, validateUser.errors ?? [], item);
  const storeErrors =
    item !== null && typeof item === 'object'
      ? storageProblems(index, /** @type {Record<string, unknown>} */ (item))
      : null;
  // One message a field: a rule of the schema it breaks already says what to fix.
  const notYetSaid = (storeErrors ?? []).filter(
    (e) => !schemaErrors.some((s) => s.field === e.field),
  );
  return [...schemaErrors, ...notYetSaid];
}

// Sorted by email (stable), each email once: ignore keeps an email's first item; merge applies its
// items in the order of their changes (none first, then by changedAt, a tie to the later line).
/** @param {UserRow[]} rows @param {Resolution} resolution */
export function oncePerEmail(rows, resolution) {
  if (rows.length > 1) rows.sort(byEmail);
  let kept = 0;
  for (let i = 0; i < rows.length;) {
    let end = i + 1;
    while (end < rows.length && rows[end][KEY] === rows[i][KEY]) end++;
    rows[kept++] = end - i === 1 || resolution !== 'merge' ? rows[i] : merged(rows.slice(i, end));
    i = end;
  }
  rows.length = kept;
  return rows;
}

/** One email's items, in the order sent, merged. @param {UserRow[]} run @returns {UserRow} */
function merged(run) {
  // Stable: a tie keeps the order sent.
  if (run.some((r) => r[ORDER] !== null)) run.sort((a, b) => compareChanges(a[ORDER], b[ORDER]));
  let m = run[0];
  for (let i = 1; i < run.length; i++) m = laterOver(m, run[i]);
  return m;
}

/**
 * A later change over an earlier one: the later's values, but for `kept` columns sent only in the
 * earlier. @param {UserRow} m @param {UserRow} r @returns {UserRow}
 */
function laterOver(m, r) {
  const row = { ...r };
  for (const field of KEPT_FIELDS) row[field] = r[field] ?? m[field];
  return row;
}

const ORDER = ORDER_COLUMN.field;

/** Rows in their key's order. @param {UserRow} a @param {UserRow} b */
export const byEmail = (a, b) => (a[KEY] < b[KEY] ? -1 : a[KEY] > b[KEY] ? 1 : 0);

// For the OpenAPI document, generated from the very schema ajv compiles.
export { userSchema, MESSAGES, UNKNOWN_FIELD };
