import { startBatchedPurge } from '../db/batched-purge.js';
import { PURGE_BATCH_ROWS, purgeExpiredKeys } from './idempotency-keys.js';

// The background purge of expired Idempotency-Keys, in short batches that skip rows a writer
// holds: every process purges (replicas, cluster workers), their batches skipping each other's.

/** @param {number} ttlSeconds */
export const purgeIntervalMs = (ttlSeconds) =>
  Math.min(60_000, Math.max(1000, (ttlSeconds * 1000) / 4));

/**
 * @param {{ db: import('../db/database.js').Database, ttlSeconds: number,
 *   logger: import('pino').Logger, batchRows?: number, intervalMs?: number }} options
 */
export function startKeyPurge({
  db,
  ttlSeconds,
  logger,
  batchRows = PURGE_BATCH_ROWS,
  intervalMs = purgeIntervalMs(ttlSeconds),
}) {
  return startBatchedPurge({
    db,
    deleteBatch: () => purgeExpiredKeys(db, batchRows),
    batchRows,
    intervalMs,
    roundDone: (deleted) => {
      if (deleted > 0) logger.debug({ deleted }, 'expired idempotency keys purged');
    },
    roundFailed: (err) =>
      logger.warn({ err }, 'purging expired idempotency keys failed; trying again next round'),
  });
}
