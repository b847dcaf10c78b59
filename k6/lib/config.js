// What both load tests read from the environment (k6 run -e NAME=value, or the shell's).

export const BASE_URL = (__ENV.BASE_URL || 'http://127.0.0.1:3000').replace(/\/$/, '');
export const TOKEN = __ENV.TOKEN || '';
/** closed: each VU sleeps 1 s between iterations (the reference experiment); capacity: no sleep. */
export const MODE = __ENV.MODE === 'capacity' ? 'capacity' : 'closed';
/** Keeps emails unique across runs against the same database, so replays never hide behind ON CONFLICT. */
export const RUN_ID =
  __ENV.RUN_ID || `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
/**
 * 1: a replay-heavy load. Every odd iteration resends the users of the VU's previous iteration,
 * all already stored, so half the requests are replays that should insert nothing (answered 200).
 * changed: the same, with a new name for every user, so that a merge (RESOLUTION=merge) updates
 * every replayed row.
 */
export const REPLAY = __ENV.REPLAY === '1' || __ENV.REPLAY === 'changed' ? __ENV.REPLAY : '';
/**
 * 1: every user carries `changedAt` (merge mode's ordering value), the time of its iteration's
 * change: a replay sends the same (stale in merge mode), a changed replay a newer one (updated).
 */
export const CHANGED_AT = __ENV.CHANGED_AT === '1';
/** merge: every request asks `Prefer: resolution=merge-duplicates`; else the default (ignore). */
export const RESOLUTION = __ENV.RESOLUTION === 'merge' ? 'merge' : 'ignore';
/**
 * representation: every request also asks `Prefer: return=representation, count=exact` (PostgREST's
 * way to get the rows written back), and its counts are read from Content-Range.
 */
export const RETURN = __ENV.RETURN === 'representation' ? 'representation' : '';
/** Where handleSummary writes k6's summary data as JSON; unset, no file (the bench and smoke test set it). */
export const SUMMARY_FILE = __ENV.SUMMARY_FILE || '';

/**
 * The scenario: the defaults mirror the reference experiment, VUS and DURATION change them.
 * @param {{ vus: number, duration: string, rampUp: boolean }} defaults
 */
export function scenario(defaults) {
  const vus = Number(__ENV.VUS || defaults.vus);
  const duration = __ENV.DURATION || defaults.duration;
  if (defaults.rampUp && MODE !== 'capacity') {
    return {
      executor: 'ramping-vus',
      startVUs: 0,
      stages: [{ duration, target: vus }],
      gracefulRampDown: '30s',
      gracefulStop: '30s',
    };
  }
  return { executor: 'constant-vus', vus, duration, gracefulStop: '30s' };
}
