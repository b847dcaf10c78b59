import { isErasedWrite } from './erasure-guard.js';

// A write whose assertion failed (erasure-guard.js) goes again without the rows a tombstone keeps
// out, each part told how many it lost. Another erasure may land between the lookup and the next
// try: a few rounds, then the failure as it came.

/** @import { ErasureGuard } from './erasure-guard.js' */
/** @import { Database, Outcome, Part, UserRow, WriteRequest } from './write-types.js' */

const ROUNDS = 3;

/**
 * @param {{ db: Database, erasures: ErasureGuard }} deps @param {WriteRequest} request
 * @param {(request: WriteRequest) => Promise<Outcome[]>} write @returns {Promise<Outcome[]>}
 */
export async function withoutErased({ db, erasures }, request, write) {
  let going = request;
  for (let round = 1; ; round++) {
    try {
      return countKeptOut(request.parts, going.parts, await write(going));
    } catch (err) {
      if (!isErasedWrite(err) || round === ROUNDS) throw err;
      const stale = await erasures.staleOf(db, going.rows);
      going = leftOut(going, stale);
    }
  }
}

/** @param {WriteRequest} request @param {Set<UserRow>} stale @returns {WriteRequest} */
function leftOut(request, stale) {
  if (stale.size === 0) return request;
  const kept = (/** @type {UserRow} */ row) => !stale.has(row);
  return {
    ...request,
    rows: request.rows.filter(kept),
    parts: request.parts.map((part) => ({ ...part, rows: part.rows.filter(kept) })),
  };
}

/**
 * @param {readonly Part[]} sent @param {readonly Part[]} written @param {Outcome[]} outcomes
 */
function countKeptOut(sent, written, outcomes) {
  if (sent === written) return outcomes;
  return outcomes.map((outcome, i) => {
    const keptOut = sent[i].rows.length - written[i].rows.length;
    return 'taken' in outcome || keptOut === 0 ? outcome : { ...outcome, tombstoned: keptOut };
  });
}
