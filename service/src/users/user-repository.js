import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import format from 'pg-format';
import copyStreams from 'pg-copy-streams';

/** @typedef {import('./user-schema.js').UserRow} UserRow */
/** @typedef {import('pg').PoolClient} PoolClient */
/** @typedef {(client: PoolClient, rows: UserRow[]) => Promise<number>} InsertChunk */

const COLUMNS = 'email, name, phone, password_hash';
// Every strategy skips an email already stored, and its command tag counts only the new rows.
const ON_CONFLICT = 'ON CONFLICT (email) DO NOTHING';

// pg-format's quoteLiteral walks every string character by character; under the batch load test
// it and the garbage it made were a third of the service's CPU. A value without a quote or a
// backslash needs no escaping, and for it pg-format returns exactly the value in single quotes;
// every other value still goes through pg-format (a test checks both give the same SQL).
const NEEDS_ESCAPING = /['\\]/;
/** @param {string | null} v */
const literal = (v) => (v === null ? 'NULL' : NEEDS_ESCAPING.test(v) ? format.literal(v) : `'${v}'`);

/**
 * The whole statement for one chunk: a multi-row VALUES list quoted by pg-format.
 * @param {UserRow[]} rows
 */
export function buildInsertSql(rows) {
  const values = rows.map((r) => `(${literal(r[0])}, ${literal(r[1])}, ${literal(r[2])}, ${literal(r[3])})`).join(', ');
  return format(`INSERT INTO users (${COLUMNS}) VALUES %s ${ON_CONFLICT}`, values);
}

/** @type {InsertChunk} */
async function insertWithFormat(client, rows) {
  const result = await client.query(buildInsertSql(rows));
  return result.rowCount ?? 0;
}

const UNNEST_SQL = `INSERT INTO users (${COLUMNS})
  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) ${ON_CONFLICT}`;

/** Four array parameters instead of a literal per value: no quoting, one parse. @type {InsertChunk} */
async function insertWithUnnest(client, rows) {
  const columns = /** @type {[string[], string[], (string | null)[], (string | null)[]]} */ ([[], [], [], []]);
  for (const row of rows) {
    columns[0].push(row[0]);
    columns[1].push(row[1]);
    columns[2].push(row[2]);
    columns[3].push(row[3]);
  }
  const result = await client.query(UNNEST_SQL, columns);
  return result.rowCount ?? 0;
}

// The staging table lives as long as the pooled connection; rows go at each commit.
const STAGING_DDL = `CREATE TEMP TABLE users_staging (email text, name text, phone text, password_hash text) ON COMMIT DELETE ROWS`;
/** @type {WeakSet<PoolClient>} */
const clientsWithStaging = new WeakSet();

/** A CSV field: quoted (so an empty string stays one), NULL as nothing at all. @param {string | null} v */
const csvField = (v) => (v === null ? '' : `"${v.replaceAll('"', '""')}"`);

/** COPY into a staging table, then one INSERT ... SELECT. Runs inside a transaction. @type {InsertChunk} */
async function insertWithCopy(client, rows) {
  if (!clientsWithStaging.has(client)) {
    await client.query(STAGING_DDL);
    clientsWithStaging.add(client);
  }
  const csv = rows.map((r) => `${csvField(r[0])},${csvField(r[1])},${csvField(r[2])},${csvField(r[3])}\n`).join('');
  await pipeline(Readable.from([csv]), client.query(copyStreams.from('COPY users_staging FROM STDIN (FORMAT csv)')));
  // ORDER BY keeps the lock order of the sorted batch, which the staging table does not promise.
  const result = await client.query(`INSERT INTO users (${COLUMNS}) SELECT ${COLUMNS} FROM users_staging ORDER BY email ${ON_CONFLICT}`);
  await client.query('TRUNCATE users_staging');
  return result.rowCount ?? 0;
}

/**
 * How a chunk is written, by INSERT_STRATEGY. `transactional`: it needs a transaction even for a
 * single chunk (copy's staging table).
 * @type {Record<import('../config.js').Config['insertStrategy'], { insertChunk: InsertChunk, transactional: boolean }>}
 */
export const STRATEGIES = {
  format: { insertChunk: insertWithFormat, transactional: false },
  unnest: { insertChunk: insertWithUnnest, transactional: false },
  copy: { insertChunk: insertWithCopy, transactional: true },
};

/**
 * Writes the rows all or nothing: one statement per chunk of `chunkRows`; several chunks run in
 * one transaction, a single chunk needs none (one statement is atomic).
 *
 * @param {import('../db.js').Database} db
 * @param {UserRow[]} rows  validated, sorted by email, no email twice
 * @param {{ chunkRows: number, strategy: import('../config.js').Config['insertStrategy'] }} options
 * @returns {Promise<number>} rows actually inserted
 */
export async function insertUsers(db, rows, { chunkRows, strategy }) {
  const { insertChunk, transactional } = STRATEGIES[strategy];
  if (rows.length <= chunkRows && !transactional) return db.withClient((client) => insertChunk(client, rows));
  return db.transaction(async (client) => {
    let inserted = 0;
    for (let start = 0; start < rows.length; start += chunkRows) {
      inserted += await insertChunk(client, rows.slice(start, start + chunkRows));
    }
    return inserted;
  });
}
