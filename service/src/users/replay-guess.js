/**
 * Guesses whether the next batch may hold emails already stored, from how recent batches went.
 *
 * Writing a batch as all-new is the cheap way; a batch that turns out to hold a stored email pays
 * that attempt and then the skipping one. Replays come in runs (a redelivered message, a re-sent
 * file, a client retrying after a timeout), so after one the writer skips stored emails at once
 * for `holdMs`, and each replay seen meanwhile extends it. A run of new users is back on the cheap
 * path `holdMs` after the last replay.
 *
 * @param {{ holdMs?: number, now?: () => number }} [options]
 */
export function createReplayGuess({ holdMs = 2_000, now = Date.now } = {}) {
  let until = -Infinity;
  return {
    /** True while a replay was seen in the last `holdMs`. */
    likely: () => now() < until,
    /** A batch held a stored email. */
    seen() {
      until = now() + holdMs;
    },
  };
}

/** @typedef {ReturnType<typeof createReplayGuess>} ReplayGuess */
