import { ApiError, InvalidBatchError } from '../errors.js';
import { KEY_COLUMN } from '../user-columns.js';
import { checkErasures } from '../users/erasure-items.js';

// DELETE /users's filter, as PostgREST writes it: `email=eq.X` or `email=in.(X,Y)` (a value with
// a comma or a parenthesis in double quotes, `\` escaping within them). Nothing else is served: a
// DELETE that would reach more than the users it names is refused before anything is erased.

const KEY = KEY_COLUMN.field;
/** What a DELETE's query may hold besides the filter: the representation's columns. */
const NOT_FILTERS = new Set(['select', 'columns']);

/**
 * The emails a DELETE names, each lower-cased as stored, in the order given.
 * @param {string} search without the `?` @returns {string[]}
 */
export function emailsOfFilter(search) {
  const params = new URLSearchParams(search);
  for (const name of new Set(params.keys()))
    if (name !== KEY && !NOT_FILTERS.has(name))
      throw unsupported(`?${name}: users are erased by ${KEY} only`);
  const values = params.getAll(KEY);
  if (values.length === 0) throw new ApiError('missing_filter');
  if (values.length > 1) throw unsupported(`?${KEY} is given ${values.length} times; give it once`);
  const emails = listOf(values[0]);
  try {
    return checkErasures(emails.map((email) => ({ [KEY]: email }))).map((e) => e.email);
  } catch (err) {
    if (!(err instanceof InvalidBatchError)) throw err;
    const [first] = err.errors;
    throw unsupported(`the ${ordinal(first.index)} email of the filter ${first.message}`);
  }
}

/** @param {string} value @returns {string[]} */
function listOf(value) {
  if (value.startsWith('eq.')) return [value.slice(3)];
  if (value.startsWith('in.(') && value.endsWith(')')) return splitList(value.slice(4, -1));
  const operator = value.split('.')[0];
  throw unsupported(`${KEY}=${operator}.…: the operators served are eq and in`);
}

/** PostgREST's list: commas outside double quotes. @param {string} list */
function splitList(list) {
  const values = [];
  let current = '';
  let quoted = false;
  for (let i = 0; i < list.length; i++) {
    const c = list[i];
    if (quoted && c === '\\' && i + 1 < list.length) current += list[++i];
    else if (c === '"') quoted = !quoted;
    else if (c === ',' && !quoted) {
      values.push(current);
      current = '';
    } else current += c;
  }
  if (quoted) throw unsupported(`${KEY}=in.(…): a double quote is not closed`);
  values.push(current);
  return values;
}

/** @param {number} index */
const ordinal = (index) => `#${index + 1}`;

/** @param {string} message */
const unsupported = (message) => new ApiError('unsupported_filter', message);
