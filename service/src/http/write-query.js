import { ApiError } from '../errors.js';
import { SECRET_FIELDS, SHOWN_FIELDS, USER_FIELDS } from '../user-columns.js';

// The query parameters of PostgREST's insert and upsert that sluice reads on POST /users:
// `on_conflict` (the conflict target), `columns` (the keys read from each object) and `select` (the
// columns of a return=representation answer). Other parameters are ignored, as before.

/** The keys a user object may have (user-columns.js), which are the columns one can write. */
export const WRITE_COLUMNS = USER_FIELDS;
/** The columns a representation holds, in this order: those the declaration shows (never the password hash), then when the row was created and updated. */
export const READ_COLUMNS = /** @type {readonly (import('../user-columns.js').ShownField | 'createdAt' | 'updatedAt')[]} */ ([...SHOWN_FIELDS, 'createdAt', 'updatedAt']);
/**
 * sluice's per-item report: `outcome` in `select` (never in `*`) makes a representation hold every
 * item of the request, in order, each with what became of it (post-users.js representation()).
 */
export const OUTCOME = 'outcome';
/** @typedef {typeof READ_COLUMNS[number] | typeof OUTCOME} ReadColumn */
/** @typedef {typeof WRITE_COLUMNS[number]} WriteColumn */

/**
 * What the query asks of a write.
 * @typedef {object} WriteQuery
 * @property {(WriteColumn | 'password')[]} [columns]  only these keys are read from each object
 * @property {ReadColumn[]} [select]  the columns of a representation (all when not given)
 */

/** @type {Readonly<WriteQuery>} */
const NOTHING = Object.freeze({});

/**
 * A comma-separated list of column names, as postgrest-js sends them (`"email","name"`): each name
 * trimmed and unquoted.
 * @param {string} value
 */
const names = (value) => value.split(',').map((n) => n.trim().replace(/^"(.*)"$/, '$1'));

/**
 * @param {URLSearchParams} params @param {string} name
 * @returns {string | undefined}
 */
function single(params, name) {
  const values = params.getAll(name);
  if (values.length === 0) return undefined;
  if (values.length > 1) throw new ApiError('unsupported_query', `?${name} is given ${values.length} times; give it once`);
  if (values[0].trim() === '') throw new ApiError('unsupported_query', `?${name} is empty; name at least one column`);
  return values[0];
}

/**
 * The query of a POST /users.
 * @param {string} search  the query string, without the `?`
 * @returns {WriteQuery}
 * @throws {ApiError} unknown_column, unsupported_conflict_target, unsupported_query
 */
export function parseWriteQuery(search) {
  if (search === '') return NOTHING;
  const params = new URLSearchParams(search);
  /** @type {WriteQuery} */
  const query = {};

  const onConflict = single(params, 'on_conflict');
  if (onConflict !== undefined) {
    const target = names(onConflict);
    const unknown = target.find((c) => !(/** @type {readonly string[]} */ (WRITE_COLUMNS)).includes(c) && !(/** @type {readonly string[]} */ (READ_COLUMNS)).includes(c));
    if (unknown !== undefined) throw unknownColumn(unknown, 'on_conflict', WRITE_COLUMNS);
    if (target.length !== 1 || target[0] !== 'email') {
      throw new ApiError('unsupported_conflict_target', `on_conflict=${target.join(',')}: ${target.join(', ')} ${target.length === 1 ? 'is' : 'are'} not a unique key of users; the only one is email`);
    }
  }

  const columns = single(params, 'columns');
  if (columns !== undefined) {
    const list = names(columns);
    // `password` passes, so the validator refuses it with what to send instead (passwordHash).
    const unknown = list.find((c) => !(/** @type {readonly string[]} */ (WRITE_COLUMNS)).includes(c) && c !== 'password');
    if (unknown !== undefined) throw unknownColumn(unknown, 'columns', WRITE_COLUMNS);
    query.columns = /** @type {(WriteColumn | 'password')[]} */ ([...new Set(list)]);
  }

  const select = single(params, 'select');
  if (select !== undefined) query.select = parseSelect(select);
  return query;
}

/**
 * `select`: `*`, or a list of columns. What PostgREST reads beyond that (embedded resources,
 * renaming, casts, JSON paths, aggregates) has nothing to apply to here.
 * @param {string} select
 * @returns {ReadColumn[]}
 */
function parseSelect(select) {
  /** @type {Set<ReadColumn>} */
  const chosen = new Set();
  for (const name of names(select)) {
    if (name === '*') {
      for (const c of READ_COLUMNS) chosen.add(c);
      continue;
    }
    if (/[():!.>-]/.test(name)) {
      throw new ApiError('unsupported_query', `select=${select}: only column names and * are read (no embedding, renaming, casts or JSON paths)`);
    }
    if (name === OUTCOME) {
      chosen.add(OUTCOME);
      continue;
    }
    if ((/** @type {readonly string[]} */ (SECRET_FIELDS)).includes(name)) throw new ApiError('unknown_column', `${name} is never returned: select from ${READ_COLUMNS.join(', ')}`);
    if (!(/** @type {readonly string[]} */ (READ_COLUMNS)).includes(name)) throw unknownColumn(name, 'select', [...READ_COLUMNS, OUTCOME]);
    chosen.add(/** @type {ReadColumn} */ (name));
  }
  // In the order asked, as PostgREST answers.
  return [...chosen];
}

/** @param {string} column @param {string} parameter @param {readonly string[]} known */
function unknownColumn(column, parameter, known) {
  return new ApiError('unknown_column', `Could not find the '${column}' column of 'users' (?${parameter}); its columns are ${known.join(', ')}`);
}
