import { Ajv } from 'ajv';
import { InvalidBatchError } from '../errors.js';

/** @typedef {import('../errors.js').ItemError} ItemError */
/** @typedef {{ email: string, name: string, phone?: string, passwordHash?: string }} User */
/** A row as the table takes it: [email (lower-cased), name, phone, password_hash]. */
/** @typedef {[string, string, string | null, string | null]} UserRow */

export const MAX_REPORTED_ERRORS = 100;

// Control characters (C0, DEL, C1): invisible in logs and UIs, and NUL cannot be stored in text.
const NO_CONTROL = '^[^\\u0000-\\u001f\\u007f-\\u009f]*$';
const EMAIL = '^[^\\s@\\u0000-\\u001f\\u007f]+@[^\\s@\\u0000-\\u001f\\u007f]+\\.[^\\s@\\u0000-\\u001f\\u007f]+$';

const userSchema = {
  type: 'object',
  required: ['email', 'name'],
  additionalProperties: false,
  properties: {
    email: { type: 'string', maxLength: 254, pattern: EMAIL },
    name: { type: 'string', minLength: 1, maxLength: 200, pattern: NO_CONTROL },
    phone: { type: 'string', pattern: '^\\+[0-9]{6,15}$' },
    passwordHash: { type: 'string', maxLength: 255, pattern: '^\\$[a-z0-9-]+\\$' },
  },
};

// What each rule means to someone sending users, by field and ajv keyword.
const MESSAGES = {
  email: { type: 'must be a string', maxLength: 'must be at most 254 characters', pattern: 'must be a plausible email address (local@domain.tld)' },
  name: { type: 'must be a string', minLength: 'must not be empty', maxLength: 'must be at most 200 characters', pattern: 'must not contain control characters (NUL included)' },
  phone: { type: 'must be a string', pattern: 'must be + followed by 6 to 15 digits' },
  passwordHash: { type: 'must be a string', maxLength: 'must be at most 255 characters', pattern: 'must be a PHC / modular-crypt hash starting with $id$ (e.g. $argon2id$...)' },
};
const PASSWORD_REFUSED = 'plaintext passwords are never accepted: hash it (argon2id, bcrypt, scrypt) and send passwordHash';

// Compiled once: the compiled function is plain JavaScript, about a microsecond a user.
const validateUser = new Ajv({ allErrors: true, strict: true, unicodeRegExp: true }).compile(userSchema);

/**
 * Turns ajv's findings about one item into the contract's error entries.
 * @param {number} index
 * @param {import('ajv').ErrorObject[]} errors
 * @returns {ItemError[]}
 */
function describe(index, errors) {
  return errors.map((e) => {
    if (e.keyword === 'required') {
      return { index, field: e.params.missingProperty, message: 'is required' };
    }
    if (e.keyword === 'additionalProperties') {
      const field = e.params.additionalProperty;
      return { index, field, message: field === 'password' ? PASSWORD_REFUSED : 'is not a known field (allowed: email, name, phone, passwordHash)' };
    }
    if (e.instancePath === '') {
      return { index, field: null, message: 'each item must be a user object' };
    }
    const field = e.instancePath.slice(1);
    const byField = /** @type {Record<string, Record<string, string>>} */ (MESSAGES)[field];
    return { index, field, message: byField?.[e.keyword] ?? e.message ?? 'is invalid' };
  });
}

/**
 * Checks every item of a batch against the contract and, when all pass, returns the rows to write:
 * emails lower-cased, duplicates within the batch dropped, sorted by email so that concurrent
 * overlapping batches take their row locks in the same order and cannot deadlock.
 *
 * @param {unknown[]} items  the parsed body, already known to be a non-empty array
 * @returns {UserRow[]}
 * @throws {InvalidBatchError} naming up to 100 problems, in index order
 */
export function parseUserBatch(items) {
  /** @type {ItemError[]} */
  const problems = [];
  let invalidItems = 0;
  for (let i = 0; i < items.length; i++) {
    if (validateUser(items[i])) continue;
    invalidItems++;
    if (problems.length < MAX_REPORTED_ERRORS) problems.push(...describe(i, validateUser.errors ?? []));
  }
  if (invalidItems > 0) {
    const errors = problems.slice(0, MAX_REPORTED_ERRORS);
    throw new InvalidBatchError(`${invalidItems} of ${items.length} users are invalid; nothing was written`, errors);
  }

  const rows = /** @type {User[]} */ (items).map(
    (u) => /** @type {UserRow} */ ([u.email.toLowerCase(), u.name, u.phone ?? null, u.passwordHash ?? null]),
  );
  rows.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  // Sorted, so a repeated email sits next to its first occurrence; the first one wins.
  return rows.filter((row, i) => i === 0 || row[0] !== rows[i - 1][0]);
}

// For the OpenAPI document (openapi.js), which is generated from the very schema ajv compiles.
export { userSchema, MESSAGES };
