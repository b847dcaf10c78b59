import format from 'pg-format';

// Every statement that writes users, built in one place. The row source and the conflict clause
// are chosen apart, so every strategy and both resolutions share the same conflict handling.

/** @typedef {import('./user-schema.js').UserRow} UserRow */
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

export const COLUMNS = 'email, name, phone, password_hash, changed_at';

/**
 * What a merge stores over a stored row, as the SQL of its name, phone, password hash and ordering
 * value: the sent name; the sent phone and hash, or the stored ones where the item had none; the
 * sent changed_at. Said once, for the update, for the test that skips a row it would not change,
 * and for the filter below.
 * @param {string} sent  the row sent (EXCLUDED, or an alias) @param {string} stored  the stored row
 */
const mergedValues = (sent, stored) =>
  `${sent}.name, COALESCE(${sent}.phone, ${stored}.phone), COALESCE(${sent}.password_hash, ${stored}.password_hash), ${sent}.changed_at`;
/** @param {string} stored */
const storedValues = (stored) => `${stored}.name, ${stored}.phone, ${stored}.password_hash, ${stored}.changed_at`;
/**
 * Whether a sent change is not newer than the stored row, so merge mode writes nothing of it: the
 * stored row has an ordering value and the sent one is older, the same, or none (an item without
 * changedAt cannot show it is newer: the row never goes back in time). NULL-safe on purpose (never
 * unknown), as NOT EXISTS below negates it. A stored row without one takes any change (as before
 * changedAt existed), and a change with one always beats it.
 * @param {string} sent @param {string} stored
 */
export const notNewer = (sent, stored) =>
  `(${stored}.changed_at IS NOT NULL AND (${sent}.changed_at IS NULL OR ${sent}.changed_at <= ${stored}.changed_at))`;

// A row whose values would not change is left alone (no new row version, no WAL), and so is a
// row whose stored change is as new as the one sent or newer. updated_at is set only by a change,
// so a returned row whose updated_at is NULL was inserted.
export const MERGE = `ON CONFLICT (email) DO UPDATE SET
  (name, phone, password_hash, changed_at, updated_at) = (${mergedValues('EXCLUDED', 'users')}, now())
  WHERE (${storedValues('users')}) IS DISTINCT FROM (${mergedValues('EXCLUDED', 'users')})
    AND NOT ${notNewer('EXCLUDED', 'users')}`;

/** @type {Record<OnConflict, string>} */
const ON_CONFLICT = { fail: '', skip: 'ON CONFLICT (email) DO NOTHING', merge: MERGE };

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
  WHERE NOT EXISTS (SELECT FROM users u WHERE u.email = t.email COLLATE "C"
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
const RETURNING_ROWS = { fail: '', skip: ' RETURNING email', merge: ' RETURNING email, created_at, phone, updated_at' };
/** The statement before a write that returns rows, unless it merges: when the rows it inserts are created. */
const CREATED_NOW = { fail: 'SELECT now(); ', skip: 'SELECT now(); ', merge: '' };

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
 * The statement around a row source (`SELECT ...` or `VALUES ...` giving the five columns, the
 * last a timestamptz).
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
 * @param {UserRow[]} rows @param {0 | 1 | 2 | 3 | 4} c
 */
function arrayLiteral(rows, c) {
  let text = '{';
  let plain = true;
  for (let i = 0; i < rows.length; i++) {
    const v = rows[i][c];
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

/**
 * The rows as a row source built by pg-format from literals: `unnest` over one array constant per
 * column, so one chunk is one statement whose size PostgreSQL parses in five constants. When no
 * row has an ordering value its array is empty: unnest pads a shorter array with NULLs, so nothing
 * is parsed for it.
 * @param {UserRow[]} rows
 */
export function rowsAsArrays(rows) {
  return format(
    'SELECT * FROM unnest(%s::text[], %s::text[], %s::text[], %s::text[], %s::timestamptz[])',
    arrayLiteral(rows, 0),
    arrayLiteral(rows, 1),
    arrayLiteral(rows, 2),
    arrayLiteral(rows, 3),
    rows.some((r) => r[4] !== null) ? arrayLiteral(rows, 4) : "'{}'",
  );
}

/**
 * The rows as a multi-row VALUES list, a literal per value: the shape before bench:db chose the
 * arrays (kept for that benchmark, and as the reference the array form is checked against).
 * @param {UserRow[]} rows
 */
export function rowsAsValues(rows) {
  return format('VALUES %s', rows.map((r) => `(${literal(r[0])}, ${literal(r[1])}, ${literal(r[2])}, ${literal(r[3])}, ${literal(r[4])}::timestamptz)`).join(', '));
}

/** The row source of the `unnest` strategy: five array parameters, $1 to $5. */
export const ROWS_AS_PARAMETERS = 'SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[])';

/**
 * The rows as the five column arrays the parameters of ROWS_AS_PARAMETERS take.
 * @param {UserRow[]} rows
 */
export function columnArrays(rows) {
  const columns = /** @type {[string[], string[], (string | null)[], (string | null)[], (string | null)[]]} */ ([[], [], [], [], []]);
  for (const row of rows) {
    columns[0].push(row[0]);
    columns[1].push(row[1]);
    columns[2].push(row[2]);
    columns[3].push(row[3]);
    columns[4].push(row[4]);
  }
  return columns;
}

/** A CSV field for COPY: quoted (so an empty string stays one), NULL as nothing at all. @param {string | null} v */
export const csvField = (v) => (v === null ? '' : `"${v.replaceAll('"', '""')}"`);

/** @param {UserRow[]} rows */
export const rowsAsCsv = (rows) => rows.map(csvLine).join('');
/** One row as a CSV line for COPY. @param {UserRow} r */
export const csvLine = (r) => `${csvField(r[0])},${csvField(r[1])},${csvField(r[2])},${csvField(r[3])},${csvField(r[4])}\n`;

/** @param {string} table */
export const copySql = (table) => `COPY ${table} (${COLUMNS}) FROM STDIN (FORMAT csv)`;

// COPY cannot resolve conflicts: the copy strategy stages a chunk in a temporary table, then
// inserts from it. The transaction's own: made in it, dropped at its end (commit or rollback), so
// nothing outlives the transaction on a connection a pooler hands to someone else next; emptied
// after each chunk.
export const STAGING_TABLE = 'users_staging';
export const CREATE_STAGING = `CREATE TEMPORARY TABLE ${STAGING_TABLE} (email text, name text, phone text, password_hash text, changed_at timestamptz) ON COMMIT DROP`;
export const EMPTY_STAGING = `TRUNCATE ${STAGING_TABLE}`;
export const FROM_STAGING = `SELECT ${COLUMNS} FROM ${STAGING_TABLE}`;
