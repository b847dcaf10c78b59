/**
 * Whether the next write may hold stored emails: replays come in runs (a redelivered message, a
 * re-sent file), so for `holdMs` after one the writer resolves conflicts at once.
 * @param {{ holdMs?: number, now?: () => number }} [options]
 */
export function createReplayGuess({ holdMs = 2_000, now = Date.now } = {}) {
  let until = -Infinity;
  return {
    likely: () => now() < until,
    seen() {
      until = now() + holdMs;
    },
  };
}

/** @typedef {ReturnType<typeof createReplayGuess>} ReplayGuess */
