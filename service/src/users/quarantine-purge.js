import { startBatchedPurge } from '../db/batched-purge.js';
import { purgeOldBatch } from './quarantine-sql.js';

// The background purge of quarantined_items: every process, every few minutes, deletes the rows
// last sent more than the retention ago, in short batches that skip rows a writer holds.

/** @import { Database } from '../db/database.js' */

const PURGE_BATCH_ROWS = 1000;
const INTERVAL_MS = 5 * 60_000;

/** @param {Database} db @param {number} retentionDays @param {number} batchRows */
async function purgeBatch(db, retentionDays, batchRows) {
  const batch = purgeOldBatch(retentionDays, batchRows);
  return batch.decode(
    await db.withClient((client) => client.query(db.settings.statement(batch.text))),
  );
}

/**
 * @param {{ db: Database, retentionDays: number, logger: import('pino').Logger,
 *   purged: (rows: number) => void, batchRows?: number, intervalMs?: number }} options
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
