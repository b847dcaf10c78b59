import { InvalidBatchError } from '../errors.js';
import { KEY_COLUMN, ORDER_COLUMN } from '../user-columns.js';
import { MAX_REPORTED_ERRORS, checkUser } from './user-schema.js';

// The items of an erasure: `{email, changedAt?}` objects, strict, each field under a user's rules
// for it (an email lower-cased as stored, a changedAt that exists).

/** @import { Erasure } from './erase.js' */

/** @type {readonly string[]} */
const FIELDS = [KEY_COLUMN.field, ORDER_COLUMN.field];
const NOT_AN_ERASURE = `each item must be an object {${FIELDS.join(', ')}}`;
const UNKNOWN = `is not a field of an erasure (allowed: ${FIELDS.join(', ')})`;
// A user's rules need a name: any valid one, for the fields an erasure has.
const ANY_NAME = { name: 'erased' };

/**
 * @param {unknown} item @param {number} index
 * @returns {Erasure | import('../errors.js').ItemError[]}
 */
function checkErasure(item, index) {
  if (item === null || typeof item !== 'object' || Array.isArray(item))
    return [{ index, field: null, message: NOT_AN_ERASURE }];
  const unknown = Object.keys(item).filter((field) => !FIELDS.includes(field));
  if (unknown.length > 0) return unknown.map((field) => ({ index, field, message: UNKNOWN }));
  const checked = checkUser({ ...item, ...ANY_NAME }, index);
  if (Array.isArray(checked)) return checked;
  return { email: checked[KEY_COLUMN.field], changedAt: checked[ORDER_COLUMN.field] };
}

/**
 * Every item as an erasure, in the order sent, when all pass; else an InvalidBatchError.
 * @param {unknown[]} items @returns {Erasure[]}
 */
export function checkErasures(items) {
  /** @type {import('../errors.js').ItemError[]} */
  const problems = [];
  let invalid = 0;
  /** @type {Erasure[]} */
  const erasures = [];
  items.forEach((item, i) => {
    const checked = checkErasure(item, i);
    if (!Array.isArray(checked)) return erasures.push(checked);
    invalid++;
    problems.push(...checked);
  });
  if (invalid > 0)
    throw new InvalidBatchError(
      `${invalid} of ${items.length} erasures are invalid; nothing was erased`,
      problems.slice(0, MAX_REPORTED_ERRORS),
    );
  return erasures;
}
