import { ApiError } from '../errors.js';
import { KEY_COLUMN, READ_FIELDS, SECRET_FIELDS, USER_FIELDS, isOneOf } from '../user-columns.js';

export const WRITE_COLUMNS = USER_FIELDS;
/** In this order: those the declaration shows (never the password hash), then the times. */
export const READ_COLUMNS = READ_FIELDS;
/** `outcome` in `select` (never in `*`): a representation of every item, with what became of it. */
export const OUTCOME = 'outcome';
/** @typedef {typeof READ_COLUMNS[number] | typeof OUTCOME} ReadColumn */
/** @typedef {typeof WRITE_COLUMNS[number]} WriteColumn */
/** @typedef {{ columns?: (WriteColumn | 'password')[], select?: ReadColumn[] }} WriteQuery */

const NOTHING = /** @type {Readonly<WriteQuery>} */ (Object.freeze({}));

/** As postgrest-js sends them (`"email","name"`). @param {string} value */
const names = (value) => value.split(',').map((n) => n.trim().replace(/^"(.*)"$/, '$1'));

/** @param {URLSearchParams} params @param {string} name @returns {string | undefined} */
function single(params, name) {
  const values = params.getAll(name);
  if (values.length === 0) return undefined;
  if (values.length > 1)
    throw new ApiError(
      'unsupported_query',
      `?${name} is given ${values.length} times; give it once`,
    );
  if (values[0].trim() === '')
    throw new ApiError('unsupported_query', `?${name} is empty; name at least one column`);
  return values[0];
}

/** Without the `?`. @param {string} search @returns {WriteQuery} */
export function parseWriteQuery(search) {
  if (search === '') return NOTHING;
  const params = new URLSearchParams(search);
  /** @type {WriteQuery} */
  const query = {};

  const onConflict = single(params, 'on_conflict');
  if (onConflict !== undefined) {
    const target = names(onConflict);
    const unknown = target.find((c) => !isOneOf(WRITE_COLUMNS, c) && !isOneOf(READ_COLUMNS, c));
    if (unknown !== undefined) throw unknownColumn(unknown, 'on_conflict', WRITE_COLUMNS);
    if (target.length !== 1 || target[0] !== KEY_COLUMN.field) {
      throw new ApiError(
        'unsupported_conflict_target',
        `on_conflict=${target.join(',')}: ${target.join(', ')} ` +
          `${target.length === 1 ? 'is' : 'are'} not a unique key of users; ` +
          `the only one is ${KEY_COLUMN.field}`,
      );
    }
  }

  const columns = single(params, 'columns');
  if (columns !== undefined) {
    const list = names(columns);
    // `password` passes, so the validator refuses it with what to send instead (passwordHash).
    const unknown = list.find((c) => !isOneOf(WRITE_COLUMNS, c) && c !== 'password');
    if (unknown !== undefined) throw unknownColumn(unknown, 'columns', WRITE_COLUMNS);
    query.columns = /** @type {(WriteColumn | 'password')[]} */ ([...new Set(list)]);
  }

  const select = single(params, 'select');
  if (select !== undefined) query.select = parseSelect(select);
  return query;
}

/**
 * `*` or column names (PostgREST's embedding, casts and paths have nothing to apply to).
 * @param {string} select @returns {ReadColumn[]}
 */
export function parseSelect(select) {
  /** @type {Set<ReadColumn>} */
  const chosen = new Set();
  for (const name of names(select)) {
    if (name === '*') {
      for (const c of READ_COLUMNS) chosen.add(c);
      continue;
    }
    if (/[():!.>-]/.test(name)) {
      throw new ApiError(
        'unsupported_query',
        `select=${select}: only column names and * are ` +
          `read (no embedding, renaming, casts or JSON paths)`,
      );
    }
    if (name === OUTCOME) {
      chosen.add(OUTCOME);
      continue;
    }
    if (isOneOf(SECRET_FIELDS, name))
      throw new ApiError(
        'unknown_column',
        `${name} is never returned: select from ${READ_COLUMNS.join(', ')}`,
      );
    if (!isOneOf(READ_COLUMNS, name))
      throw unknownColumn(name, 'select', [...READ_COLUMNS, OUTCOME]);
    chosen.add(name);
  }
  // In the order asked, as PostgREST answers.
  return [...chosen];
}

/** @param {string} column @param {string} parameter @param {readonly string[]} known */
function unknownColumn(column, parameter, known) {
  return new ApiError(
    'unknown_column',
    `Could not find the '${column}' column of 'users' ` +
      `(?${parameter}); its columns are ${known.join(', ')}`,
  );
}
