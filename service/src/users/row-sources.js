import format from 'pg-format';
import { USER_COLUMNS } from '../user-columns.js';

// A write's rows as its statement's source (user-sql.js builds the statement around it), from the
// columns' declaration (user-columns.js): one array literal a column (the default), a VALUES list
// (the reference it is checked against), array parameters (`unnest`), CSV lines for COPY.

/** @typedef {import('../user-columns.js').UserRow} UserRow */
/** @typedef {import('../user-columns.js').UserField} UserField */

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

const FIELDS = USER_COLUMNS.map((c) => c.field);
/** One row as a CSV line for COPY, its fields in COLUMNS' order. @param {UserRow} r */
export function csvLine(r) {
  let line = csvField(r[FIELDS[0]]);
  for (let i = 1; i < FIELDS.length; i++) line += `,${csvField(r[FIELDS[i]])}`;
  return `${line}\n`;
}
/** @param {UserRow[]} rows */
export const rowsAsCsv = (rows) => rows.map(csvLine).join('');
