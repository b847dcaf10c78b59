import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import copyStreams from 'pg-copy-streams';
import { guarded } from './erasure-sql.js';
import {
  CREATE_STAGING,
  FROM_STAGING,
  ROWS_AS_PARAMETERS,
  STAGING_TABLE,
  columnArrays,
  copySql,
  rowsAsArrays,
  rowsAsCsv,
  writeFromStaging,
  writeWithCounts,
} from './user-sql.js';

// How one chunk of a request's rows is written, by INSERT_STRATEGY (user-writer.js chunks).

/** @import { ChunkWriter, Lending, Statement, UserRow } from './write-types.js' */

/**
 * Labelled INSERT whatever comes before it (settings, CREATED_NOW).
 * @param {string} text @param {Omit<import('pg').QueryConfig, 'text'>} [config]
 */
export const insertQuery = (text, config) => ({ ...config, text, operation: 'INSERT' });

/**
 * A write sent after its settings (SET LOCALs), answered as its decoder reads it.
 * @template T @param {Lending} client @param {Statement<T>} statement @param {string} [settings]
 * @returns {Promise<T>}
 */
export const sendWrite = async (client, statement, settings = '') =>
  statement.decode(await client.query(insertQuery(settings + statement.text, statement)));

/** One pg-format statement a chunk, its settings before it in one query. @type {ChunkWriter} */
export const formatWriter = {
  write: async (client, rows, { onConflict, settings, assertion }) =>
    sendWrite(
      client,
      writeWithCounts(guarded(rowsAsArrays(rows), assertion(rows)), onConflict),
      settings,
    ),
};

/** Array parameters, alone in its query: always in BEGIN/COMMIT. @type {ChunkWriter} */
const unnestWriter = {
  needsTransaction: true,
  write: async (client, rows, { onConflict, assertion }) =>
    sendWrite(
      client,
      writeWithCounts(guarded(ROWS_AS_PARAMETERS, assertion(rows)), onConflict, columnArrays(rows)),
    ),
};

/**
 * COPY into users when every email must be new, its assertion in COMMIT's round trip (the COPY
 * holds the lock an erasure waits for), else via the staging table. @type {ChunkWriter}
 */
const copyWriter = {
  needsTransaction: true,
  beginWith: (onConflict) => (onConflict === 'fail' ? '' : CREATE_STAGING),
  async write(client, rows, { onConflict, assertion }) {
    if (onConflict === 'fail') {
      const inserted = await copyInto(client, 'users', rows);
      client.withCommit(`SELECT WHERE NOT EXISTS (${assertion(rows)}); `);
      return { inserted, updated: 0 };
    }
    await copyInto(client, STAGING_TABLE, rows);
    return sendWrite(client, writeFromStaging(onConflict, guarded(FROM_STAGING, assertion(rows))));
  },
};

/** @param {Lending} client @param {string} table @param {UserRow[]} rows */
async function copyInto(client, table, rows) {
  const copy = client.query(copyStreams.from(copySql(table)));
  await pipeline(Readable.from([rowsAsCsv(rows)]), copy);
  return copy.rowCount ?? rows.length;
}

/** By INSERT_STRATEGY; its keys are the strategies config.js accepts. */
export const STRATEGIES = Object.freeze({
  format: formatWriter,
  unnest: unnestWriter,
  copy: copyWriter,
});
