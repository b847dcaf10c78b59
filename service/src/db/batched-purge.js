// A round deletes batch after batch (one short transaction each) until one finds fewer than
// `batchRows` or MAX_BATCHES_A_ROUND ran: a backlog is worked off without hogging a connection.

const MAX_BATCHES_A_ROUND = 100;

/**
 * @typedef {{ db: import('./db-types.js').Database, deleteBatch: () => Promise<number>,
 *   batchRows: number, intervalMs: number, roundDone: (deleted: number) => void,
 *   roundFailed: (err: unknown) => void }} BatchedPurge
 */

/** @param {BatchedPurge} purge @returns {{ round: () => Promise<number>, stop: () => void }} */
export function startBatchedPurge({
  db,
  deleteBatch,
  batchRows,
  intervalMs,
  roundDone,
  roundFailed,
}) {
  /** @type {Promise<number> | undefined} */
  let running;
  const stopped = () => db.pool.ending || db.pool.ended;

  async function purgeRound() {
    let deleted = 0;
    for (let batch = 0; batch < MAX_BATCHES_A_ROUND && !stopped(); batch++) {
      const rows = await deleteBatch();
      deleted += rows;
      if (rows < batchRows) break;
    }
    roundDone(deleted);
    return deleted;
  }

  const round = () => {
    running ??= purgeRound().finally(() => {
      running = undefined;
    });
    return running;
  };
  const timer = setInterval(() => {
    if (stopped()) return clearInterval(timer);
    round().catch(roundFailed);
  }, intervalMs);
  timer.unref();
  return { round, stop: () => clearInterval(timer) };
}
