import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import copyStreams from 'pg-copy-streams';
import { lastResult } from '../db/transaction-settings.js';
import {
  CREATE_STAGING,
  EMPTY_STAGING,
  FROM_STAGING,
  ROWS_AS_PARAMETERS,
  STAGING_TABLE,
  columnArrays,
  copySql,
  rowsAsArrays,
  rowsAsCsv,
  writeStatement,
} from './user-sql.js';

// How one chunk of a request's rows is written, by INSERT_STRATEGY (user-writer.js chunks).

/** @typedef {import('./user-schema.js').UserRow} UserRow */
/** @typedef {import('./user-sql.js').OnConflict} OnConflict */
/** @typedef {import('../db/lending.js').Lending} Lending */
/** @typedef {import('./user-writer.js').Counts} Counts */
/**
 * Writes one chunk (a stored email fails it, 23505, when `onConflict` is 'fail').
 * @typedef {object} ChunkWriter
 * @property {(client: Lending, rows: UserRow[], onConflict: OnConflict,
 *   settings?: string) => Promise<Counts>} write settings: SET LOCALs before its statement, when
 *   BEGIN set none
 * @property {boolean} [needsTransaction] its statement cannot carry the settings (parameters, COPY)
 * @property {(onConflict: OnConflict) => string} [beginWith]  statements for BEGIN's round trip
 */

/**
 * A writer's statement, labelled INSERT whatever comes before it (settings, CREATED_NOW).
 * @param {string} text
 * @param {Omit<import('pg').QueryConfig, 'text'>} [config]
 */
export const insertQuery = (text, config) => ({ ...config, text, operation: 'INSERT' });

/**
 * An answer as counts: the command tag when it only inserts, else its counts row.
 * @param {import('pg').QueryResult | import('pg').QueryResult[]} answer
 * @param {OnConflict} onConflict
 * @returns {Counts}
 */
function countsOf(answer, onConflict) {
  const result = lastResult(answer);
  return onConflict === 'merge' ? result.rows[0] : { inserted: result.rowCount ?? 0, updated: 0 };
}
/** @param {OnConflict} onConflict */
const returningFor = (onConflict) => (onConflict === 'merge' ? 'counts' : 'none');

/** One pg-format statement a chunk, its settings before it in one query. @type {ChunkWriter} */
export const formatWriter = {
  write: async (client, rows, onConflict, settings = '') =>
    countsOf(
      await client.query(
        insertQuery(
          settings + writeStatement(rowsAsArrays(rows), onConflict, returningFor(onConflict)),
        ),
      ),
      onConflict,
    ),
};

/**
 * Array parameters instead of literals; alone in its query, so always in BEGIN/COMMIT.
 * @type {ChunkWriter}
 */
const unnestWriter = {
  needsTransaction: true,
  write: async (client, rows, onConflict) =>
    countsOf(
      await client.query(
        insertQuery(writeStatement(ROWS_AS_PARAMETERS, onConflict, returningFor(onConflict)), {
          values: columnArrays(rows),
        }),
      ),
      onConflict,
    ),
};

/**
 * COPY into users when every email must be new; else into the staging table, then INSERT ... SELECT
 * with the conflict clause.
 * @type {ChunkWriter}
 */
const copyWriter = {
  needsTransaction: true,
  beginWith: (onConflict) => (onConflict === 'fail' ? '' : CREATE_STAGING),
  async write(client, rows, onConflict) {
    if (onConflict === 'fail')
      return { inserted: await copyInto(client, 'users', rows), updated: 0 };
    await copyInto(client, STAGING_TABLE, rows);
    const answer = await client.query(
      insertQuery(
        `${writeStatement(FROM_STAGING, onConflict, returningFor(onConflict))}; ${EMPTY_STAGING}`,
      ),
    );
    // Two statements, two results: the write's is the first.
    return countsOf(
      /** @type {import('pg').QueryResult[]} */ (/** @type {unknown} */ (answer))[0],
      onConflict,
    );
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
/** @typedef {keyof typeof STRATEGIES} Strategy */
