import format from 'pg-format';

/** @typedef {import('./user-schema.js').UserRow} UserRow */
/** @typedef {import('pg').PoolClient} PoolClient */
/** @typedef {(client: PoolClient, rows: UserRow[]) => Promise<number>} InsertChunk */

const COLUMNS = 'email, name, phone, password_hash';

/**
 * The whole statement for one chunk: a multi-row VALUES list quoted by pg-format. Replays are
 * harmless because an email already stored is skipped, and the command tag counts only new rows.
 *
 * @param {UserRow[]} rows
 */
export function buildInsertSql(rows) {
  return format(`INSERT INTO users (${COLUMNS}) VALUES %L ON CONFLICT (email) DO NOTHING`, rows);
}

/** @type {InsertChunk} */
async function insertWithFormat(client, rows) {
  const result = await client.query(buildInsertSql(rows));
  return result.rowCount ?? 0;
}

/** @type {Record<string, { insertChunk: InsertChunk }>} */
export const STRATEGIES = {
  format: { insertChunk: insertWithFormat },
};

/**
 * Writes the rows all or nothing: one statement per chunk of `chunkRows`; several chunks run in
 * one transaction, a single chunk needs none (one statement is atomic).
 *
 * @param {import('../db.js').Database} db
 * @param {UserRow[]} rows  validated, sorted by email, no email twice
 * @param {{ chunkRows: number, strategy: string }} options
 * @returns {Promise<number>} rows actually inserted
 */
export async function insertUsers(db, rows, { chunkRows, strategy }) {
  const { insertChunk } = STRATEGIES[strategy];
  if (rows.length <= chunkRows) return db.withClient((client) => insertChunk(client, rows));
  return db.transaction(async (client) => {
    let inserted = 0;
    for (let start = 0; start < rows.length; start += chunkRows) {
      inserted += await insertChunk(client, rows.slice(start, start + chunkRows));
    }
    return inserted;
  });
}
