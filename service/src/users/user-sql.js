import { lastResult } from '../db/transaction-settings.js';
import {
  CREATED_AT,
  KEY_COLUMN as KEY,
  ORDER_COLUMN as ORDER,
  READ_FIELDS,
  SHOWN_FIELDS,
  UPDATED_AT,
  USER_COLUMNS,
} from '../user-columns.js';

// The users table's statements, built from the columns' declaration (user-columns.js), each beside
// its decoder, the one function that reads what it answers.

/** @import { Answer, OnConflict, Returning, Statement, UserColumn } from './sql-types.js' */
/** @import { UserRow, WriteCounts, WrittenUser } from './sql-types.js' */

export {
  ROWS_AS_PARAMETERS,
  columnArrays,
  csvField,
  csvLine,
  literal,
  rowsAsArrays,
  rowsAsCsv,
  rowsAsValues,
} from './row-sources.js';

/** The columns a merge updates: all but the key, the conflict target. */
const UPDATED = USER_COLUMNS.filter((c) => c.merge !== 'key');

/** Every column, in the declaration's order: what every row source gives. */
export const COLUMNS = USER_COLUMNS.map((c) => c.column).join(', ');

/** @param {string} sent @param {string} stored */
const mergedValues = (sent, stored) =>
  UPDATED.map((c) =>
    c.merge === 'kept'
      ? `COALESCE(${sent}.${c.column}, ${stored}.${c.column})`
      : `${sent}.${c.column}`,
  ).join(', ');
/** @param {string} stored */
const storedValues = (stored) => UPDATED.map((c) => `${stored}.${c.column}`).join(', ');
/**
 * A sent change no newer than the stored row (older, equal, or unordered against an ordered one):
 * merge skips it. NULL-safe, as NOT EXISTS negates it. @param {string} sent @param {string} stored
 */
export const notNewer = (sent, stored) => {
  const [fromSent, fromStored] = [`${sent}.${ORDER.column}`, `${stored}.${ORDER.column}`];
  return `(${fromStored} IS NOT NULL AND (${fromSent} IS NULL OR ${fromSent} <= ${fromStored}))`;
};

const MERGED_SENT = mergedValues('EXCLUDED', 'users');
// Unchanged or stale rows are left alone; UPDATED_AT NULL in a returned row means inserted.
export const MERGE = `ON CONFLICT (${KEY.column}) DO UPDATE SET
  (${UPDATED.map((c) => c.column).join(', ')}, ${UPDATED_AT.column}) = (${MERGED_SENT}, now())
  WHERE (${storedValues('users')}) IS DISTINCT FROM (${MERGED_SENT})
    AND NOT ${notNewer('EXCLUDED', 'users')}`;

/** @type {Record<OnConflict, string>} */
const ON_CONFLICT = { fail: '', skip: `ON CONFLICT (${KEY.column}) DO NOTHING`, merge: MERGE };

/** Merge's rows less those stored unchanged or newer, a key probe a row. @param {string} source */
const changedRows = (source) => {
  const [stored, merged, stale] = [storedValues('u'), mergedValues('t', 'u'), notNewer('t', 'u')];
  return `SELECT ${COLUMNS} FROM (${source}) AS t (${COLUMNS})
  WHERE NOT EXISTS (SELECT FROM users u WHERE u.${KEY.column} = t.${KEY.column} COLLATE "C"
    AND ((${stored}) IS NOT DISTINCT FROM (${merged}) OR ${stale}) OFFSET 0)`;
};

/**
 * The statement around a row source giving COLUMNS; each answer has its decoder below.
 * @param {string} source @param {OnConflict} onConflict @param {Returning} returning
 */
export function writeStatement(source, onConflict, returning) {
  const insert = insertStatement(source, onConflict);
  if (returning === 'emails') return `${insert} RETURNING ${KEY.column}, ${INSERTED}`;
  if (returning === 'rows')
    return `${CREATED_NOW[onConflict]}${insert}${RETURNING_ROWS[onConflict]}`;
  if (returning === 'none') return insert;
  return `WITH written AS (${insert} RETURNING ${INSERTED})
    SELECT count(*) FILTER (WHERE inserted)::int AS inserted,
      count(*) FILTER (WHERE NOT inserted)::int AS updated FROM written`;
}
const INSERTED = `${UPDATED_AT.column} IS NULL AS inserted`;

/** @param {string} source @param {OnConflict} onConflict */
const insertStatement = (source, onConflict) =>
  `INSERT INTO users (${COLUMNS}) ${onConflict === 'merge' ? changedRows(source) : source}
  ${ON_CONFLICT[onConflict]}`;

/** 'none': the command tag counts the rows inserted (a merge's would count its updates too). */
const insertedOf = (/** @type {Answer} */ answer) => ({
  inserted: lastResult(answer).rowCount ?? 0,
  updated: 0,
});
/** 'counts': its one row. @param {Answer} answer @returns {WriteCounts} */
const countsOf = (answer) => lastResult(answer).rows[0];

/**
 * In counts: 'counts' when it merges, else the command tag. @param {string} source
 * @param {OnConflict} onConflict @param {unknown[]} [values] @returns {Statement<WriteCounts>}
 */
export const writeWithCounts = (source, onConflict, values) =>
  onConflict === 'merge'
    ? { text: writeStatement(source, onConflict, 'counts'), values, decode: countsOf }
    : { text: writeStatement(source, onConflict, 'none'), values, decode: insertedOf };

/** 'emails': each key, whether inserted. @param {Answer} answer @returns {Map<string, boolean>} */
export const decodeWrittenEmails = (answer) =>
  new Map(lastResult(answer).rows.map((row) => [row[KEY.column], row.inserted]));

/**
 * @param {string} source @param {OnConflict} onConflict
 * @returns {Statement<Map<string, boolean>>}
 */
export const writeWithEmails = (source, onConflict) => ({
  text: writeStatement(source, onConflict, 'emails'),
  decode: decodeWrittenEmails,
});

/**
 * A staged chunk written, in counts, and the staging table emptied in the same round trip.
 * @param {OnConflict} onConflict @param {string} [source] the staged rows, guarded
 * @returns {Statement<WriteCounts>}
 */
export function writeFromStaging(onConflict, source = FROM_STAGING) {
  const write = writeWithCounts(source, onConflict);
  return {
    text: `${write.text}; ${EMPTY_STAGING}`,
    // Two statements, two results: the write's is the first.
    decode: (answer) => write.decode(Array.isArray(answer) ? answer[0] : answer),
  };
}

// 'rows': what a representation needs of each row written that the request does not hold: its key,
// and when merging CREATED_AT, the kept columns shown and UPDATED_AT (RETURNED_AS_TEXT).
const RETURNED_KEPT = USER_COLUMNS.filter((c) => c.shown === true && c.merge === 'kept');
const MERGE_RETURNS = [
  KEY.column,
  CREATED_AT.column,
  ...RETURNED_KEPT.map((c) => c.column),
  UPDATED_AT.column,
];
const RETURNING_ROWS = {
  fail: '',
  skip: ` RETURNING ${KEY.column}`,
  merge: ` RETURNING ${MERGE_RETURNS.join(', ')}`,
};
const AT = {
  key: MERGE_RETURNS.indexOf(KEY.column),
  created: MERGE_RETURNS.indexOf(CREATED_AT.column),
  kept: RETURNED_KEPT.map((c) => MERGE_RETURNS.indexOf(c.column)),
  updated: MERGE_RETURNS.indexOf(UPDATED_AT.column),
};
const KEPT_SHOWN = RETURNED_KEPT.map((c) => c.field);
/** Before a write that returns rows, unless it merges: when the rows it inserts are created. */
const CREATED_NOW = { fail: 'SELECT now(); ', skip: 'SELECT now(); ', merge: '' };
/** CREATED_NOW's answer among a query's results, as JSON writes it. @param {Answer} result */
export const createdNowOf = (result) =>
  timestampAsJson(
    (Array.isArray(result) ? result : [result]).find((r) => r.command === 'SELECT')?.rows[0][0],
  );

/**
 * A timestamptz's ISO text (`2026-11-25 04:15:04.123456+00`) as JSON writes it (`...T...+00:00`);
 * other text as it came. @param {string} text
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
// Every row a statement inserts has the same CREATED_AT (its transaction's start): one conversion.
let lastText = '';
let lastJson = '';

/** pg's options for a statement that returns rows: arrays of the text PostgreSQL sent. */
export const RETURNED_AS_TEXT = Object.freeze({
  rowMode: 'array',
  types: { getTypeParser: () => (/** @type {string} */ v) => v },
});

/** A representation's row before its values: every field, in order (one shape for every row). */
const NOT_WRITTEN = Object.fromEntries(READ_FIELDS.map((f) => [f, null]));

/** @param {UserRow} row @param {string} created @returns {WrittenUser} */
export function insertedUser(row, created) {
  /** @type {Record<string, string | null>} */
  const user = { ...NOT_WRITTEN };
  for (let i = 0; i < SHOWN_FIELDS.length; i++) user[SHOWN_FIELDS[i]] = row[SHOWN_FIELDS[i]];
  user[CREATED_AT.field] = created;
  return /** @type {WrittenUser} */ (user);
}

/**
 * A row a merge wrote, as a representation shows it: the kept columns as stored (a merge keeps a
 * stored value where the item had none), the others as sent.
 * @param {UserRow} row @param {(string | null)[]} r what RETURNING_ROWS gave @returns {WrittenUser}
 */
export function mergedUser(row, r) {
  /** @type {Record<string, string | null>} */
  const user = { ...NOT_WRITTEN };
  for (let i = 0; i < SHOWN_FIELDS.length; i++) user[SHOWN_FIELDS[i]] = row[SHOWN_FIELDS[i]];
  for (let i = 0; i < KEPT_SHOWN.length; i++) user[KEPT_SHOWN[i]] = r[AT.kept[i]];
  user[CREATED_AT.field] = timestampAsJson(/** @type {string} */ (r[AT.created]));
  const updated = r[AT.updated];
  user[UPDATED_AT.field] = updated === null ? null : timestampAsJson(updated);
  return /** @type {WrittenUser} */ (user);
}

/**
 * 'rows': the rows written, matched to those sent in order, else by key. @returns {WrittenUser[]}
 * @param {UserRow[]} sent @param {Answer} answer @param {OnConflict} onConflict
 */
export function decodeWrittenUsers(sent, answer, onConflict) {
  // Without a conflict clause the statement wrote every row, or failed.
  if (onConflict === 'fail') {
    const now = createdNowOf(answer);
    return sent.map((row) => insertedUser(row, now));
  }
  /** @type {(string | null)[][]} */
  const returned = lastResult(answer).rows;
  const now = onConflict === 'merge' ? '' : createdNowOf(answer);
  /** @param {UserRow} row @param {(string | null)[]} r @returns {WrittenUser} */
  const user = onConflict === 'merge' ? mergedUser : (row) => insertedUser(row, now);
  /** @type {WrittenUser[]} */
  const users = [];
  let next = 0;
  for (const row of sent) {
    if (next === returned.length) break;
    if (returned[next][AT.key] === row[KEY.field]) users.push(user(row, returned[next++]));
  }
  if (next === returned.length) return users;
  const byKey = new Map(returned.map((r) => [r[AT.key], r]));
  users.length = 0;
  for (const row of sent) {
    const r = byKey.get(row[KEY.field]);
    if (r) users.push(user(row, r));
  }
  return users;
}

/**
 * @param {UserRow[]} sent the rows the source gives @param {string} source
 * @param {OnConflict} onConflict @returns {Statement<WrittenUser[]>}
 */
export const writeWithUsers = (sent, source, onConflict) => ({
  text: writeStatement(source, onConflict, 'rows'),
  ...RETURNED_AS_TEXT,
  decode: (answer) => decodeWrittenUsers(sent, answer, onConflict),
});

/** @param {string} table */
export const copySql = (table) => `COPY ${table} (${COLUMNS}) FROM STDIN (FORMAT csv)`;

/** Each with its type; the key compared as bytes when `collateC`. @param {boolean} collateC */
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
// (`ord`), which decides which of a key's lines wins; its key compares bytes (COLLATE "C").
const STREAM_STAGING = 'users_stream';
// `email_hmac`: each line's email hashed, when the import leaves out what erasures keep out.
export const CREATE_STREAM_STAGING = `CREATE TEMPORARY TABLE ${STREAM_STAGING}
  (ord bigint GENERATED ALWAYS AS IDENTITY, ${stagedColumns(true)}, email_hmac bytea)
  ON COMMIT DROP`;
export const EMPTY_STREAM_STAGING = `TRUNCATE ${STREAM_STAGING}`;
export const COPY_STREAM_STAGING = copySql(STREAM_STAGING);
export const COPY_STREAM_STAGING_HASHED = `COPY ${STREAM_STAGING} (${COLUMNS}, email_hmac)
  FROM STDIN (FORMAT csv)`;
export const COPY_USERS = copySql('users');
// Every key once, sorted: ignore keeps its first line; merge each column by its declaration,
// changes ordered by ORDER (none oldest, a tie to the later line), as parseUserBatch merges.
export const FIRST_OF_EACH = `SELECT DISTINCT ON (${KEY.column}) ${COLUMNS} FROM ${STREAM_STAGING}
  ORDER BY ${KEY.column}, ord`;
const NEWEST_FIRST = `${ORDER.column} DESC NULLS LAST, ord DESC`;
/** @param {UserColumn} c */
const newestOf = (c) =>
  c.merge === 'order'
    ? `max(${c.column})`
    : `(array_agg(${c.column} ORDER BY ${NEWEST_FIRST})` +
      `${c.merge === 'kept' ? ` FILTER (WHERE ${c.column} IS NOT NULL)` : ''})[1]`;
export const MERGED_OF_EACH = `SELECT ${KEY.column}, ${UPDATED.map(newestOf).join(',\n  ')}
  FROM ${STREAM_STAGING} GROUP BY ${KEY.column} ORDER BY ${KEY.column}`;
export const ALL_AS_SENT = `SELECT ${COLUMNS} FROM ${STREAM_STAGING} ORDER BY ${KEY.column}`;
/** Merge mode's first attempt: every staged row as new (a stored or repeated key fails it). */
export const INSERT_ALL_AS_SENT = `INSERT INTO users (${COLUMNS}) ${ALL_AS_SENT}`;
