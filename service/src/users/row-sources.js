import format from 'pg-format';
import { USER_COLUMNS } from '../user-columns.js';

// A write's rows as its statement's source, from the columns' declaration: one array literal a
// column (the default), a VALUES list, array parameters (`unnest`), CSV lines for COPY.

/** @import { UserField, UserRow } from './sql-types.js' */

// A value without a quote or a backslash is quoted directly: the SQL pg-format would write.
const NEEDS_ESCAPING = /['\\]/;
/** @param {string | null} v */
export const literal = (v) =>
  v === null ? 'NULL' : NEEDS_ESCAPING.test(v) ? format.literal(v) : `'${v}'`;

/**
 * A column as one array constant (PostgreSQL parses one literal a column), each element quoted.
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

const castArrays = (/** @type {(i: number) => string} */ placeholder) =>
  USER_COLUMNS.map((c, i) => `${placeholder(i)}::${c.type}[]`).join(', ');
const ROWS_AS_ARRAYS = `SELECT * FROM unnest(${castArrays(() => '%s')})`;

/** One array constant a column; '{}' for a sparse column no row has. @param {UserRow[]} rows */
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

/** For bench:db, the reference the array form is checked against. @param {UserRow[]} rows */
export function rowsAsValues(rows) {
  return format(
    'VALUES %s',
    rows
      .map((r) => `(${USER_COLUMNS.map((c) => literal(r[c.field]) + castTo(c.type)).join(', ')})`)
      .join(', '),
  );
}

/** The `unnest` strategy's row source: an array parameter a column. */
export const ROWS_AS_PARAMETERS = `SELECT * FROM unnest(${castArrays((i) => `$${i + 1}`)})`;

/** What ROWS_AS_PARAMETERS takes. @param {UserRow[]} rows @returns {(string | null)[][]} */
export const columnArrays = (rows) => USER_COLUMNS.map((c) => rows.map((r) => r[c.field]));

/** Quoted, so that an empty string stays one; NULL as nothing at all. @param {string | null} v */
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
