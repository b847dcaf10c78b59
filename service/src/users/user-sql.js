import format from 'pg-format';
import { KEY_COLUMN as KEY, ORDER_COLUMN as ORDER, USER_COLUMNS, perColumnFunction } from '../user-columns.js';

// Every statement that writes users, built in one place from the columns' declaration
// (user-columns.js): the only module that turns a row into SQL (or CSV), in the columns' order,
// and what a statement returned back into rows. The row source and the conflict clause are chosen
// apart, so every strategy and both resolutions share the same conflict handling.

/** @typedef {import('../user-columns.js').UserRow} UserRow */
/** @typedef {import('../user-columns.js').WrittenUser} WrittenUser */
/** @typedef {import('../user-columns.js').UserField} UserField */
/**
 * What a statement does with an email already stored:
 * - fail: nothing (every email must be new; a stored one fails the statement with 23505);
 * - skip: ON CONFLICT DO NOTHING (ignore mode);
 * - merge: ON CONFLICT DO UPDATE, only where a value changes (merge mode).
 * @typedef {'fail' | 'skip' | 'merge'} OnConflict
 */
/**
 * What it answers: nothing but its command tag; one row of counts; a row per email it wrote; or
 * what a representation needs of each row it wrote (RETURNING_ROWS, after CREATED_NOW unless it
 * merges: two statements in one simple query, one transaction; query it with RETURNED_AS_TEXT).
 * @typedef {'none' | 'counts' | 'emails' | 'rows'} Returning
 */

/** The columns a merge updates: all but the key (KEY, the conflict target; ORDER is the ordering value). */
const UPDATED = USER_COLUMNS.filter((c) => c.merge !== 'key');

/** `email, name, phone, password_hash, changed_at` */
export const COLUMNS = USER_COLUMNS.map((c) => c.column).join(', ');

/**
 * What a merge stores over a stored row, as the SQL of each column it updates (its declaration's
 * `merge`): the sent name (newest) and changed_at (order); the sent phone and hash, or the stored
 * ones where the item had none (kept: COALESCE). Said once, for the update, for the test that skips
 * a row it would not change, and for the filter below.
 * @param {string} sent  the row sent (EXCLUDED, or an alias) @param {string} stored  the stored row
 */
const mergedValues = (sent, stored) =>
  UPDATED.map((c) => (c.merge === 'kept' ? `COALESCE(${sent}.${c.column}, ${stored}.${c.column})` : `${sent}.${c.column}`)).join(', ');
/** @param {string} stored */
const storedValues = (stored) => UPDATED.map((c) => `${stored}.${c.column}`).join(', ');
/**
 * Whether a sent change is not newer than the stored row, so merge mode writes nothing of it: the
 * stored row has an ordering value and the sent one is older, the same, or none (an item without
 * changedAt cannot show it is newer: the row never goes back in time). NULL-safe on purpose (never
 * unknown), as NOT EXISTS below negates it. A stored row without one takes any change (as before
 * changedAt existed), and a change with one always beats it.
 * @param {string} sent @param {string} stored
 */
export const notNewer = (sent, stored) =>
  `(${stored}.${ORDER.column} IS NOT NULL AND (${sent}.${ORDER.column} IS NULL OR ${sent}.${ORDER.column} <= ${stored}.${ORDER.column}))`;

// A row whose values would not change is left alone (no new row version, no WAL), and so is a
// row whose stored change is as new as the one sent or newer. updated_at is set only by a change,
// so a returned row whose updated_at is NULL was inserted.
export const MERGE = `ON CONFLICT (${KEY.column}) DO UPDATE SET
  (${UPDATED.map((c) => c.column).join(', ')}, updated_at) = (${mergedValues('EXCLUDED', 'users')}, now())
  WHERE (${storedValues('users')}) IS DISTINCT FROM (${mergedValues('EXCLUDED', 'users')})
    AND NOT ${notNewer('EXCLUDED', 'users')}`;

/** @type {Record<OnConflict, string>} */
const ON_CONFLICT = { fail: '', skip: `ON CONFLICT (${KEY.column}) DO NOTHING`, merge: MERGE };

/**
 * Merge mode's rows, less those already stored with the same values or with a change as new or
 * newer. The conflict clause would leave them unwritten too, but only after a speculative insertion
 * and a row lock each (WAL, a dirtied page): a merge replay of unchanged users cost PostgreSQL 1.3×
 * an ignore-mode replay that way (npm run bench:db). The ordering value is tested in the same probe
 * of the primary key, so a stale change costs what an unchanged one does. A row changed by a
 * concurrent writer after this statement's snapshot is still met by the conflict clause and its
 * WHERE. `OFFSET 0` keeps the NOT EXISTS a probe of the primary key per row, in the order the rows
 * were sent (sorted by email, so that concurrent writers lock in one order and cannot deadlock):
 * turned into a join, it could scan the table and hash it, and return the rows in another order.
 * @param {string} source
 */
const changedRows = (source) => `SELECT ${COLUMNS} FROM (${source}) AS t (${COLUMNS})
  WHERE NOT EXISTS (SELECT FROM users u WHERE u.${KEY.column} = t.${KEY.column} COLLATE "C"
    AND ((${storedValues('u')}) IS NOT DISTINCT FROM (${mergedValues('t', 'u')}) OR ${notNewer('t', 'u')}) OFFSET 0)`;

// What a representation needs of each row written that the request does not already hold: its email
// (which rows were written), when it was created and, in merge mode, its phone (a merge keeps a
// stored phone where the item had none) and when it was updated (null where it was inserted). The
// name and the other phones are the ones sent. Rows that can only have been inserted (fail, skip)
// were all created at their transaction's start: now(), asked once before the statement in the same
// transaction, instead of a created_at a row. A statement that fails on any stored email (fail:
// the all-new attempt) wrote every row when it did not fail, so it returns none. Timestamps come in
// PostgreSQL's own text, made JSON's by timestampAsJson. All new, this costs PostgreSQL 1.01x the
// default statement a row; RETURNING every column through to_json cost 1.26x (npm run bench:db).
// Of the columns shown, a merge returns those it may have kept from the stored row (`kept`: phone).
const SHOWN = USER_COLUMNS.filter((c) => c.shown === true);
const RETURNED_KEPT = SHOWN.filter((c) => c.merge === 'kept');
const RETURNING_ROWS = {
  fail: '',
  skip: ` RETURNING ${KEY.column}`,
  merge: ` RETURNING ${[KEY.column, 'created_at', ...RETURNED_KEPT.map((c) => c.column), 'updated_at'].join(', ')}`,
};
/** The statement before a write that returns rows, unless it merges: when the rows it inserts are created. */
const CREATED_NOW = { fail: 'SELECT now(); ', skip: 'SELECT now(); ', merge: '' };
/**
 * CREATED_NOW's answer in a query's results (after any SET LOCAL), as JSON writes it.
 * @param {import('pg').QueryResult | import('pg').QueryResult[]} result
 */
export const createdNowOf = (result) => timestampAsJson((Array.isArray(result) ? result : [result]).find((r) => r.command === 'SELECT')?.rows[0][0]);

/**
 * A timestamptz as PostgreSQL writes it in text (DateStyle ISO, which pg assumes too:
 * `2026-11-25 04:15:04.123456+00`), as JSON writes it (`2026-11-25T04:15:04.123456+00:00`, as
 * PostgREST answers it). Any other text is answered as it came.
 * @param {string} text
 */
export function timestampAsJson(text) {
  if (text === lastText) return lastJson;
  const m = ISO_TIMESTAMPTZ.exec(text);
  lastText = text;
  lastJson = m ? `${m[1]}T${m[2]}${m[3]}${m[4] ?? ':00'}${m[5] ?? ''}` : text;
  return lastJson;
}
const ISO_TIMESTAMPTZ = /^(\d{4,}-\d\d-\d\d) (\d\d:\d\d:\d\d(?:\.\d{1,6})?)([+-]\d\d)(:\d\d)?(:\d\d)?$/;
// Every row a statement inserts has the same created_at (its transaction's start): one conversion.
let lastText = '';
let lastJson = '';

/**
 * pg's options for a statement that returns rows: each row an array, each value the text
 * PostgreSQL sent (no Date made of a timestamp only to be written out again).
 */
export const RETURNED_AS_TEXT = Object.freeze({ rowMode: 'array', types: { getTypeParser: () => (/** @type {string} */ v) => v } });

/**
 * A row inserted, as a representation shows it: its columns shown as sent, and when it was created.
 * Built from the declaration: `{ email: row.email, name: row.name, phone: row.phone, createdAt, updatedAt: null }`.
 * @type {(row: UserRow, createdAt: string) => WrittenUser}
 */
export const insertedUser = perColumnFunction(
  'insertedUser',
  {},
  'row, createdAt',
  `return { ${SHOWN.map((c) => `${c.field}: row.${c.field}`).join(', ')}, createdAt, updatedAt: null };`,
);

/**
 * A row a merge wrote, as a representation shows it, from the row sent and what RETURNING_ROWS
 * returned of it (the key, created_at, the kept columns shown, updated_at): the columns it may have
 * kept as stored, the others as sent.
 * Built from the declaration: `{ email: row.email, name: row.name, phone: r[2], createdAt: ..., updatedAt: ... }`.
 * @type {(row: UserRow, r: (string | null)[]) => WrittenUser}
 */
export const mergedUser = perColumnFunction(
  'mergedUser',
  { timestampAsJson },
  'row, r',
  `return { ${SHOWN.map((c) => `${c.field}: ${c.merge === 'kept' ? `r[${2 + RETURNED_KEPT.indexOf(c)}]` : `row.${c.field}`}`).join(', ')}, ` +
    `createdAt: timestampAsJson(r[1]), updatedAt: r[${2 + RETURNED_KEPT.length}] === null ? null : timestampAsJson(r[${2 + RETURNED_KEPT.length}]) };`,
);

/**
 * The statement around a row source (`SELECT ...` or `VALUES ...` giving COLUMNS, in their
 * order and of their types).
 * @param {string} source
 * @param {OnConflict} onConflict
 * @param {Returning} returning
 */
export function writeStatement(source, onConflict, returning) {
  const insert = insertStatement(source, onConflict);
  if (returning === 'emails') return `${insert} RETURNING email, updated_at IS NULL AS inserted`;
  if (returning === 'rows') return `${CREATED_NOW[onConflict]}${insert}${RETURNING_ROWS[onConflict]}`;
  if (returning === 'none') return insert;
  return `WITH written AS (${insert} RETURNING updated_at IS NULL AS inserted)
    SELECT count(*) FILTER (WHERE inserted)::int AS inserted, count(*) FILTER (WHERE NOT inserted)::int AS updated FROM written`;
}

/** @param {string} source @param {OnConflict} onConflict */
const insertStatement = (source, onConflict) =>
  `INSERT INTO users (${COLUMNS}) ${onConflict === 'merge' ? changedRows(source) : source} ${ON_CONFLICT[onConflict]}`;

// pg-format's quoteLiteral walks every string character by character; for a value without a quote
// or a backslash it returns exactly the value in single quotes, so that is built directly, and
// every other value still goes through pg-format (a unit test checks both give the same SQL).
const NEEDS_ESCAPING = /['\\]/;
/** @param {string | null} v */
export const literal = (v) => (v === null ? 'NULL' : NEEDS_ESCAPING.test(v) ? format.literal(v) : `'${v}'`);

/**
 * A column as one array constant: each column of the chunk is one literal that PostgreSQL reads
 * with array_in, instead of a literal per value that its parser analyses and coerces one by one
 * (npm run bench:db). Each element is double-quoted (so commas, braces and spaces stay data), with
 * `"` and `\` escaped for the array syntax; the whole is then quoted as a SQL literal, by pg-format
 * when a value holds a quote or a backslash (one test a value tells both).
 * @param {UserRow[]} rows @param {UserField} field
 */
function arrayLiteral(rows, field) {
  let text = '{';
  let plain = true;
  for (let i = 0; i < rows.length; i++) {
    const v = rows[i][field];
    if (i > 0) text += ',';
    if (v === null) text += 'NULL';
    else if (!SPECIAL.test(v)) text += `"${v}"`;
    else {
      plain = false;
      text += `"${v.replace(ARRAY_SPECIALS, '\\$&')}"`;
    }
  }
  text += '}';
  return plain ? `'${text}'` : format.literal(text);
}
const SPECIAL = /["'\\]/;
const ARRAY_SPECIALS = /["\\]/g;

/** `%s::text[], %s::text[], %s::text[], %s::text[], %s::timestamptz[]`, or `$1::text[], ...` */
const castArrays = (/** @type {(i: number) => string} */ placeholder) => USER_COLUMNS.map((c, i) => `${placeholder(i)}::${c.type}[]`).join(', ');
const ROWS_AS_ARRAYS = `SELECT * FROM unnest(${castArrays(() => '%s')})`;

/**
 * The rows as a row source built by pg-format from literals: `unnest` over one array constant per
 * column, so one chunk is one statement whose size PostgreSQL parses in a constant a column. When no
 * row has a value of a sparse column (changedAt), its array is empty: unnest pads a shorter array
 * with NULLs, so nothing is parsed for it.
 * @param {UserRow[]} rows
 */
export function rowsAsArrays(rows) {
  return format(ROWS_AS_ARRAYS, ...USER_COLUMNS.map((c) => ('sparse' in c && !rows.some((r) => r[c.field] !== null) ? "'{}'" : arrayLiteral(rows, c.field))));
}

/**
 * The rows as a multi-row VALUES list, a literal per value: the shape before bench:db chose the
 * arrays (kept for that benchmark, and as the reference the array form is checked against).
 * @param {UserRow[]} rows
 */
export function rowsAsValues(rows) {
  return format('VALUES %s', rows.map((r) => `(${USER_COLUMNS.map((c) => literal(r[c.field]) + (c.type === 'text' ? '' : `::${c.type}`)).join(', ')})`).join(', '));
}

/** The row source of the `unnest` strategy: an array parameter a column, $1 to $5 today. */
export const ROWS_AS_PARAMETERS = `SELECT * FROM unnest(${castArrays((i) => `$${i + 1}`)})`;

/**
 * The rows as the column arrays the parameters of ROWS_AS_PARAMETERS take.
 * @param {UserRow[]} rows
 * @returns {(string | null)[][]}
 */
export const columnArrays = (rows) => USER_COLUMNS.map((c) => rows.map((r) => r[c.field]));

/** A CSV field for COPY: quoted (so an empty string stays one), NULL as nothing at all. @param {string | null} v */
export const csvField = (v) => (v === null ? '' : `"${v.replaceAll('"', '""')}"`);

/**
 * One row as a CSV line for COPY, its fields in COLUMNS' order. Built from the declaration:
 * `` `${csvField(r.email)},${csvField(r.name)},...\n` ``.
 * @type {(r: UserRow) => string}
 */
export const csvLine = perColumnFunction('csvLine', { csvField }, 'r', `return \`${USER_COLUMNS.map((c) => `\${csvField(r.${c.field})}`).join(',')}\\n\`;`);
/** @param {UserRow[]} rows */
export const rowsAsCsv = (rows) => rows.map(csvLine).join('');

/** @param {string} table */
export const copySql = (table) => `COPY ${table} (${COLUMNS}) FROM STDIN (FORMAT csv)`;

/** The columns of a staging table: `email text, name text, ...`; the key compared as bytes when `collateC`. @param {boolean} collateC */
const stagedColumns = (collateC) => USER_COLUMNS.map((c) => `${c.column} ${c.type}${collateC && c === KEY ? ' COLLATE "C"' : ''}`).join(', ');

// COPY cannot resolve conflicts: the copy strategy stages a chunk in a temporary table, then
// inserts from it. The transaction's own: made in it, dropped at its end (commit or rollback), so
// nothing outlives the transaction on a connection a pooler hands to someone else next; emptied
// after each chunk.
export const STAGING_TABLE = 'users_staging';
export const CREATE_STAGING = `CREATE TEMPORARY TABLE ${STAGING_TABLE} (${stagedColumns(false)}) ON COMMIT DROP`;
export const EMPTY_STAGING = `TRUNCATE ${STAGING_TABLE}`;
export const FROM_STAGING = `SELECT ${COLUMNS} FROM ${STAGING_TABLE}`;

// A streamed import's statements (stream-import.js). Its body is copied into users, or into its
// own staging table: merge mode stages the whole body, and ignore mode a chunk that met a stored or
// repeated email. `ord` keeps the order the users were sent (COPY numbers them as they come), which
// decides which of an email's lines wins. COLLATE "C" as in users: the sort and the grouping by
// email compare bytes, not through ICU.
const STREAM_STAGING = 'users_stream';
export const CREATE_STREAM_STAGING = `CREATE TEMPORARY TABLE ${STREAM_STAGING} (ord bigint GENERATED ALWAYS AS IDENTITY, ${stagedColumns(true)}) ON COMMIT DROP`;
export const EMPTY_STREAM_STAGING = `TRUNCATE ${STREAM_STAGING}`;
export const COPY_STREAM_STAGING = copySql(STREAM_STAGING);
export const COPY_USERS = copySql('users');
// Every email once, sorted (concurrent writers lock rows in one order): ignore keeps an email's
// first line; merge each column as its declaration says (merge: the name of its newest change
// (newest), the newest phone and hash sent (kept), the newest changedAt (order)), its changes
// ordered by changedAt, those without one oldest, a tie going to the later line (as
// parseUserBatch merges).
export const FIRST_OF_EACH = `SELECT DISTINCT ON (${KEY.column}) ${COLUMNS} FROM ${STREAM_STAGING} ORDER BY ${KEY.column}, ord`;
const NEWEST_FIRST = `${ORDER.column} DESC NULLS LAST, ord DESC`;
/** @param {import('../user-columns.js').UserColumn} c */
const newestOf = (c) =>
  c.merge === 'order'
    ? `max(${c.column})`
    : `(array_agg(${c.column} ORDER BY ${NEWEST_FIRST})${c.merge === 'kept' ? ` FILTER (WHERE ${c.column} IS NOT NULL)` : ''})[1]`;
export const MERGED_OF_EACH = `SELECT ${KEY.column}, ${UPDATED.map(newestOf).join(',\n  ')}
  FROM ${STREAM_STAGING} GROUP BY ${KEY.column} ORDER BY ${KEY.column}`;
export const ALL_AS_SENT = `SELECT ${COLUMNS} FROM ${STREAM_STAGING} ORDER BY ${KEY.column}`;
/** Merge mode's first attempt: every staged row as new (a stored or repeated email fails it). */
export const INSERT_ALL_AS_SENT = `INSERT INTO users (${COLUMNS}) ${ALL_AS_SENT}`;
