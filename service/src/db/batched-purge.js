// A round deletes batch after batch (one short transaction each) until one finds fewer than
// `batchRows` or MAX_BATCHES_A_ROUND ran: a backlog is worked off without hogging a connection.

const MAX_BATCHES_A_ROUND = 100;

/**
 * @typedef {object} BatchedPurge
 * @property {import('./database.js').Database} db
 * @property {() => Promise<number>} deleteBatch  its rows
 * @property {number} batchRows
 * @property {number} intervalMs
 * @property {(deleted: number) => void} roundDone
 * @property {(err: unknown) => void} roundFailed
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
