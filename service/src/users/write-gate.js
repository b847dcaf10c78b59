// Writes of one kind let through at most `slots` at a time, the others waiting in order: so large
// requests written on their own never hold every pooled connection, and group commit's statements
// (small requests, every client's) always find one.

/** @param {number} slots @returns {<T>(write: () => Promise<T>) => Promise<T>} */
export function createWriteGate(slots) {
  let free = slots;
  /** @type {(() => void)[]} */
  const waiting = [];
  const leave = () => {
    const next = waiting.shift();
    if (next) next();
    else free++;
  };
  return async (write) => {
    if (free > 0) free--;
    else await new Promise((resolve) => waiting.push(() => resolve(undefined)));
    try {
      return await write();
    } finally {
      leave();
    }
  };
}

/**
 * Slots for requests written alone: at most half the pool, never group commit's `reserved`. More
 * would only take turns inside PostgreSQL while every other request waits behind them
 * (docs/benchmarks.md, "A client that floods"). @param {number} poolMax @param {number} reserved
 */
export const writeSlotsFor = (poolMax, reserved) =>
  Math.max(1, Math.min(poolMax - reserved, Math.ceil(poolMax / 2)));
