import { startBatchedPurge } from '../db/batched-purge.js';
import { purgeOldBatch } from './quarantine-sql.js';

// The background purge of quarantined_items: every process, every few minutes, deletes the rows
// last sent more than the retention ago, in batches of PURGE_BATCH_ROWS a short transaction each,
// oldest first, skipping rows a writer holds (never waiting for them). It stops with its pool.

const PURGE_BATCH_ROWS = 1000;
const INTERVAL_MS = 5 * 60_000;

/**
 * @param {import('../db/database.js').Database} db
 * @param {number} retentionDays
 * @param {number} batchRows
 */
async function purgeBatch(db, retentionDays, batchRows) {
  const batch = purgeOldBatch(retentionDays, batchRows);
  return batch.decode(
    await db.withClient((client) => client.query(db.settings.statement(batch.text))),
  );
}

/**
 * @param {{ db: import('../db/database.js').Database, retentionDays: number,
 *   logger: import('pino').Logger, purged: (rows: number) => void, batchRows?: number,
 *   intervalMs?: number }} options purged: told of the rows each round deleted (the metric)
 * @returns {{ round: () => Promise<number>, stop: () => void }} round: one round now (the rows
 *   deleted)
 */
export function startQuarantinePurge({
  db,
  retentionDays,
  logger,
  purged,
  batchRows = PURGE_BATCH_ROWS,
  intervalMs = INTERVAL_MS,
}) {
  return startBatchedPurge({
    db,
    deleteBatch: async () => {
      const rows = await purgeBatch(db, retentionDays, batchRows);
      purged(rows);
      return rows;
    },
    batchRows,
    intervalMs,
    roundDone: (deleted) => {
      if (deleted > 0) logger.info({ deleted, retentionDays }, 'old quarantined items purged');
    },
    roundFailed: (err) =>
      logger.warn({ err }, 'purging old quarantined items failed; trying again next round'),
  });
}
