import format from 'pg-format';
import { KEY_COLUMN as KEY, ORDER_COLUMN as ORDER, USER_COLUMNS } from '../user-columns.js';

// Every statement that writes users, built from the columns' declaration (user-columns.js), and
// how what it returned is read; the row source and the conflict clause are chosen apart.

/** @typedef {import('../user-columns.js').UserRow} UserRow */
/** @typedef {import('../user-columns.js').WrittenUser} WrittenUser */
/** @typedef {import('../user-columns.js').UserField} UserField */
/**
 * A stored email: fail (23505), skip (DO NOTHING), merge (DO UPDATE where a value changes).
 * @typedef {'fail' | 'skip' | 'merge'} OnConflict
 */
/**
 * Its answer: the command tag, a counts row, a row per email, or each row for a representation
 * (RETURNED_AS_TEXT).
 * @typedef {'none' | 'counts' | 'emails' | 'rows'} Returning
 */

/**
 * The columns a merge updates: all but the key (KEY, the conflict target; ORDER is the ordering
 * value).
 */
const UPDATED = USER_COLUMNS.filter((c) => c.merge !== 'key');

/** `email, name, phone, password_hash, changed_at` */
export const COLUMNS = USER_COLUMNS.map((c) => c.column).join(', ');

/**
 * What a merge stores: the sent value, COALESCE'd with the stored one when `kept`.
 * @param {string} sent
 * @param {string} stored
 */
const mergedValues = (sent, stored) =>
  UPDATED.map((c) =>
    c.merge === 'kept'
      ? `COALESCE(${sent}.${c.column}, ${stored}.${c.column})`
      : `${sent}.${c.column}`,
  ).join(', ');
/** @param {string} stored */
const storedValues = (stored) => UPDATED.map((c) => `${stored}.${c.column}`).join(', ');
/**
 * A sent change no newer than the stored row (older, the same, or without changedAt while the
 * stored row has one): merge writes nothing of it. NULL-safe, as NOT EXISTS negates it.
 * @param {string} sent @param {string} stored
 */
export const notNewer = (sent, stored) => {
  const [fromSent, fromStored] = [`${sent}.${ORDER.column}`, `${stored}.${ORDER.column}`];
  return `(${fromStored} IS NOT NULL AND (${fromSent} IS NULL OR ${fromSent} <= ${fromStored}))`;
};

const MERGED_SENT = mergedValues('EXCLUDED', 'users');
// Unchanged or stale rows are left alone; updated_at NULL in a returned row means inserted.
export const MERGE = `ON CONFLICT (${KEY.column}) DO UPDATE SET
  (${UPDATED.map((c) => c.column).join(', ')}, updated_at) = (${MERGED_SENT}, now())
  WHERE (${storedValues('users')}) IS DISTINCT FROM (${MERGED_SENT})
    AND NOT ${notNewer('EXCLUDED', 'users')}`;

/** @type {Record<OnConflict, string>} */
const ON_CONFLICT = { fail: '', skip: `ON CONFLICT (${KEY.column}) DO NOTHING`, merge: MERGE };

/**
 * Merge's rows less those stored unchanged or newer: a key probe a row (`OFFSET 0`), in email
 * order.
 * @param {string} source
 */
const changedRows = (source) => {
  const [stored, merged, stale] = [storedValues('u'), mergedValues('t', 'u'), notNewer('t', 'u')];
  return `SELECT ${COLUMNS} FROM (${source}) AS t (${COLUMNS})
  WHERE NOT EXISTS (SELECT FROM users u WHERE u.${KEY.column} = t.${KEY.column} COLLATE "C"
    AND ((${stored}) IS NOT DISTINCT FROM (${merged}) OR ${stale}) OFFSET 0)`;
};

// What a representation needs of each row written that the request does not hold: its email,
// and in merge mode created_at, the kept columns and updated_at. Rows only inserted were created at
// the transaction's start: CREATED_NOW asks now() once, in the same query. Timestamps as text.
const SHOWN = USER_COLUMNS.filter((c) => c.shown === true);
const RETURNED_KEPT = SHOWN.filter((c) => c.merge === 'kept');
const RETURNING_ROWS = {
  fail: '',
  skip: ` RETURNING ${KEY.column}`,
  merge: ` RETURNING ${[
    KEY.column,
    'created_at',
    ...RETURNED_KEPT.map((c) => c.column),
    'updated_at',
  ].join(', ')}`,
};
/**
 * The statement before a write that returns rows, unless it merges: when the rows it inserts are
 * created.
 */
const CREATED_NOW = { fail: 'SELECT now(); ', skip: 'SELECT now(); ', merge: '' };
/**
 * CREATED_NOW's answer among a query's results, as JSON writes it.
 * @param {import('pg').QueryResult | import('pg').QueryResult[]} result
 */
export const createdNowOf = (result) =>
  timestampAsJson(
    (Array.isArray(result) ? result : [result]).find((r) => r.command === 'SELECT')?.rows[0][0],
  );

/**
 * A timestamptz's ISO text (`2026-11-25 04:15:04.123456+00`) as JSON writes it (`...T...+00:00`);
 * other text as it came.
 * @param {string} text
 */
export function timestampAsJson(text) {
  if (text === lastText) return lastJson;
  const m = ISO_TIMESTAMPTZ.exec(text);
  lastText = text;
  lastJson = m ? `${m[1]}T${m[2]}${m[3]}${m[4] ?? ':00'}${m[5] ?? ''}` : text;
  return lastJson;
}
const ISO_TIMESTAMPTZ =
  /^(\d{4,}-\d\d-\d\d) (\d\d:\d\d:\d\d(?:\.\d{1,6})?)([+-]\d\d)(:\d\d)?(:\d\d)?$/;
// Every row a statement inserts has the same created_at (its transaction's start): one conversion.
let lastText = '';
let lastJson = '';

/** pg's options for a statement that returns rows: arrays of the text PostgreSQL sent. */
export const RETURNED_AS_TEXT = Object.freeze({
  rowMode: 'array',
  types: { getTypeParser: () => (/** @type {string} */ v) => v },
});

// The row functions below are written out a column (tsc holds them to WrittenUser and the
// declaration): one object shape and plain property reads a row on the hot path.

/**
 * A row inserted, as a representation shows it: its columns shown as sent, and when it was created.
 * @param {UserRow} row @param {string} createdAt
 * @returns {WrittenUser}
 */
export const insertedUser = (row, createdAt) => ({
  email: row.email,
  name: row.name,
  phone: row.phone,
  createdAt,
  updatedAt: null,
});

/**
 * A row a merge wrote, as a representation shows it, from the row sent and what RETURNING_ROWS
 * returned of it (the key, created_at, the kept columns shown, updated_at): the phone as stored
 * (a merge keeps a stored one where the item had none), the others as sent.
 * @param {UserRow} row @param {(string | null)[]} r
 * @returns {WrittenUser}
 */
export const mergedUser = (row, r) => ({
  email: row.email,
  name: row.name,
  phone: r[2],
  createdAt: timestampAsJson(/** @type {string} */ (r[1])),
  updatedAt: r[3] === null ? null : timestampAsJson(r[3]),
});

/**
 * The statement around a row source (`SELECT ...` or `VALUES ...` giving COLUMNS).
 * @param {string} source
 * @param {OnConflict} onConflict
 * @param {Returning} returning
 */
export function writeStatement(source, onConflict, returning) {
  const insert = insertStatement(source, onConflict);
  if (returning === 'emails') return `${insert} RETURNING email, updated_at IS NULL AS inserted`;
  if (returning === 'rows')
    return `${CREATED_NOW[onConflict]}${insert}${RETURNING_ROWS[onConflict]}`;
  if (returning === 'none') return insert;
  return `WITH written AS (${insert} RETURNING updated_at IS NULL AS inserted)
    SELECT count(*) FILTER (WHERE inserted)::int AS inserted,
      count(*) FILTER (WHERE NOT inserted)::int AS updated FROM written`;
}

/** @param {string} source @param {OnConflict} onConflict */
const insertStatement = (source, onConflict) =>
  `INSERT INTO users (${COLUMNS}) ${onConflict === 'merge' ? changedRows(source) : source}
  ${ON_CONFLICT[onConflict]}`;

// A value without a quote or a backslash is quoted directly; any other through pg-format (same
// SQL).
const NEEDS_ESCAPING = /['\\]/;
/** @param {string | null} v */
export const literal = (v) =>
  v === null ? 'NULL' : NEEDS_ESCAPING.test(v) ? format.literal(v) : `'${v}'`;

/**
 * A column as one array constant (PostgreSQL parses one literal a column): each element
 * double-quoted, `"` and `\` escaped, the whole quoted as a SQL literal.
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
const castArrays = (/** @type {(i: number) => string} */ placeholder) =>
  USER_COLUMNS.map((c, i) => `${placeholder(i)}::${c.type}[]`).join(', ');
const ROWS_AS_ARRAYS = `SELECT * FROM unnest(${castArrays(() => '%s')})`;

/**
 * The rows as `unnest` over one array constant a column (a sparse column no row has: `'{}'`).
 * @param {UserRow[]} rows
 */
export function rowsAsArrays(rows) {
  return format(
    ROWS_AS_ARRAYS,
    ...USER_COLUMNS.map((c) =>
      'sparse' in c && !rows.some((r) => r[c.field] !== null)
        ? "'{}'"
        : arrayLiteral(rows, c.field),
    ),
  );
}

/** A literal's cast to a column's type; none to text. @param {string} type */
const castTo = (type) => (type === 'text' ? '' : `::${type}`);

/**
 * The rows as a VALUES list (bench:db; the reference the array form is checked against).
 * @param {UserRow[]} rows
 */
export function rowsAsValues(rows) {
  return format(
    'VALUES %s',
    rows
      .map((r) => `(${USER_COLUMNS.map((c) => literal(r[c.field]) + castTo(c.type)).join(', ')})`)
      .join(', '),
  );
}

/** The row source of the `unnest` strategy: an array parameter a column, $1 to $5 today. */
export const ROWS_AS_PARAMETERS = `SELECT * FROM unnest(${castArrays((i) => `$${i + 1}`)})`;

/**
 * The column arrays ROWS_AS_PARAMETERS takes.
 * @param {UserRow[]} rows
 * @returns {(string | null)[][]}
 */
export const columnArrays = (rows) => USER_COLUMNS.map((c) => rows.map((r) => r[c.field]));

/**
 * A CSV field for COPY: quoted (so an empty string stays one), NULL as nothing at all.
 * @param {string | null} v
 */
export const csvField = (v) => (v === null ? '' : `"${v.replaceAll('"', '""')}"`);

/** One row as a CSV line for COPY, its fields in COLUMNS' order. @param {UserRow} r */
export const csvLine = (r) =>
  `${csvField(r.email)},${csvField(r.name)},${csvField(r.phone)},${csvField(r.passwordHash)}` +
  `,${csvField(r.changedAt)}\n`;
/** @param {UserRow[]} rows */
export const rowsAsCsv = (rows) => rows.map(csvLine).join('');

/** @param {string} table */
export const copySql = (table) => `COPY ${table} (${COLUMNS}) FROM STDIN (FORMAT csv)`;

/**
 * The columns of a staging table: `email text, name text, ...`; the key compared as bytes when
 * `collateC`.
 * @param {boolean} collateC
 */
const stagedColumns = (collateC) =>
  USER_COLUMNS.map(
    (c) => `${c.column} ${c.type}${collateC && c === KEY ? ' COLLATE "C"' : ''}`,
  ).join(', ');

// COPY cannot resolve conflicts: a chunk is staged in the transaction's own temporary table.
export const STAGING_TABLE = 'users_staging';
export const CREATE_STAGING = `CREATE TEMPORARY TABLE ${STAGING_TABLE} (${stagedColumns(false)})
  ON COMMIT DROP`;
export const EMPTY_STAGING = `TRUNCATE ${STAGING_TABLE}`;
export const FROM_STAGING = `SELECT ${COLUMNS} FROM ${STAGING_TABLE}`;

// A streamed import's statements (stream-import.js): its staging table numbers the lines as sent
// (`ord`), which decides which of an email's lines wins; its key compares bytes (COLLATE "C").
const STREAM_STAGING = 'users_stream';
export const CREATE_STREAM_STAGING = `CREATE TEMPORARY TABLE ${STREAM_STAGING}
  (ord bigint GENERATED ALWAYS AS IDENTITY, ${stagedColumns(true)}) ON COMMIT DROP`;
export const EMPTY_STREAM_STAGING = `TRUNCATE ${STREAM_STAGING}`;
export const COPY_STREAM_STAGING = copySql(STREAM_STAGING);
export const COPY_USERS = copySql('users');
// Every email once, sorted: ignore keeps its first line; merge each column by its declaration,
// changes ordered by changedAt (none oldest, a tie to the later line), as parseUserBatch merges.
export const FIRST_OF_EACH = `SELECT DISTINCT ON (${KEY.column}) ${COLUMNS} FROM ${STREAM_STAGING}
  ORDER BY ${KEY.column}, ord`;
const NEWEST_FIRST = `${ORDER.column} DESC NULLS LAST, ord DESC`;
/** @param {import('../user-columns.js').UserColumn} c */
const newestOf = (c) =>
  c.merge === 'order'
    ? `max(${c.column})`
    : `(array_agg(${c.column} ORDER BY ${NEWEST_FIRST})` +
      `${c.merge === 'kept' ? ` FILTER (WHERE ${c.column} IS NOT NULL)` : ''})[1]`;
export const MERGED_OF_EACH = `SELECT ${KEY.column}, ${UPDATED.map(newestOf).join(',\n  ')}
  FROM ${STREAM_STAGING} GROUP BY ${KEY.column} ORDER BY ${KEY.column}`;
export const ALL_AS_SENT = `SELECT ${COLUMNS} FROM ${STREAM_STAGING} ORDER BY ${KEY.column}`;
/** Merge mode's first attempt: every staged row as new (a stored or repeated email fails it). */
export const INSERT_ALL_AS_SENT = `INSERT INTO users (${COLUMNS}) ${ALL_AS_SENT}`;
