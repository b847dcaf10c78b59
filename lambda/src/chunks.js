/**
 * How a batch's items are cut into posts: consecutive runs of one operation, in record order (each
 * applied whole before the next starts), and each run into chunks of one Prefer.
 */

/** @typedef {import('./records.js').Item} Item */

/**
 * A batch of upserts only is one run, the items as they are.
 * @param {Item[]} items @returns {Item[][]}
 */
export function runsOf(items) {
  /** @type {Item[][]} */
  const runs = [];
  let start = 0;
  for (let i = 1; i <= items.length; i++) {
    if (i < items.length && items[i].operation === items[start].operation) continue;
    runs.push(start === 0 && i === items.length ? items : items.slice(start, i));
    start = i;
  }
  return runs;
}

/**
 * A run's chunks of at most `size`. On a FIFO queue no message overtakes its group's: chunks follow
 * the run's order; elsewhere each Prefer's items are packed together.
 * @param {Item[]} run @param {number} size @param {boolean} fifo
 */
export const chunksOf = (run, size, fifo) => (fifo ? inOrder(run, size) : byPrefer(run, size));

/** A POST has one Prefer. @param {Item} a @param {Item} b */
const samePrefer = (a, b) => a.resolution === b.resolution && a.invalid === b.invalid;

/** @param {Item[]} items @param {number} size */
function byPrefer(items, size) {
  /** @type {Item[][]} */
  const chunks = [];
  /** @type {Item[]} */
  const kinds = [];
  for (const item of items) if (!kinds.some((k) => samePrefer(k, item))) kinds.push(item);
  for (const kind of kinds) {
    const same = items.filter((item) => samePrefer(item, kind));
    for (let i = 0; i < same.length; i += size) chunks.push(same.slice(i, i + size));
  }
  return chunks;
}

/** @param {Item[]} items @param {number} size */
function inOrder(items, size) {
  /** @type {Item[][]} */
  const chunks = [];
  for (const item of items) {
    const last = chunks.at(-1);
    if (last && last.length < size && samePrefer(last[0], item)) last.push(item);
    else chunks.push([item]);
  }
  return chunks;
}
