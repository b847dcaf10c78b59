import { outcomeInDoubt } from '../db/lending.js';
import { DatabaseTimeoutError, DatabaseUnavailableError, OutcomeUnknownError } from '../errors.js';

// What a failed write means, and what happens next, decided here for every writer: the user
// writer (a request on its own, a group's statement, a request of a failed group, the slow lane)
// and the streamed import. So are the time limits each kind of write runs under. The writers
// carry the decisions out; none of them reads a diagnosis itself.

/**
 * How long a group's statement waits for a row another writer holds, at most: one locked email
 * must not hold back the requests it shares a statement with (group commit writes each alone
 * instead). Never more than DB_LOCK_TIMEOUT_MS.
 */
export const GROUP_LOCK_TIMEOUT_MS = 250;

/**
 * A streamed import's limits: its COPYs and the INSERT at its end may rightly run for minutes, so
 * no statement timeout; DB_LOCK_TIMEOUT_MS still applies, and the watchdog still cuts a database
 * that stops answering.
 * @type {Readonly<import('../db/transaction-settings.js').TimeLimits>}
 */
export const STREAM_LIMITS = Object.freeze({ statementTimeoutMs: 0 });

/**
 * How a write is made, which decides its time limits and what its failure means:
 * - batch: one request written on its own (too big to group, or group commit off);
 * - group: one statement for several requests (users/group-commit.js);
 * - alone: one request of a group that failed, written again on its own;
 * - slow: a request still locked out alone, waiting in group commit's slow lane;
 * - stream: a streamed import (users/stream-import.js), one transaction.
 * @typedef {'batch' | 'group' | 'alone' | 'slow' | 'stream'} WriteKind
 */

/**
 * What to do after a failure: try once more (retry), write each request of a group alone
 * (each_alone), or answer `err` (fail): a 503 for the database's state, else the write's own failure.
 * @typedef {{ then: 'retry' } | { then: 'each_alone' } | { then: 'fail', err: unknown }} Decision
 */

const RETRY = Object.freeze(/** @type {const} */ ({ then: 'retry' }));
const EACH_ALONE = Object.freeze(/** @type {const} */ ({ then: 'each_alone' }));
/** @param {unknown} err @returns {Decision} */
const fail = (err) => ({ then: 'fail', err });

/**
 * The 503 a failure diagnosed as the database's state gets (db.js Diagnosis): unavailable, or one of
 * its time limits; undefined for a failure that is the request's own or passing. Whatever the
 * diagnosis, a failure after which the write may have been committed is outcome_unknown: only a
 * refusal that provably wrote nothing says so.
 * @param {import('../db/database.js').Diagnosis} diagnosis @param {unknown} cause
 * @returns {DatabaseUnavailableError | DatabaseTimeoutError | OutcomeUnknownError | undefined}
 */
export function refusalOfDatabaseState(diagnosis, cause) {
  if (outcomeInDoubt(cause)) return cause instanceof OutcomeUnknownError ? cause : new OutcomeUnknownError(cause);
  if (diagnosis === 'unavailable') return cause instanceof DatabaseUnavailableError ? cause : new DatabaseUnavailableError(cause);
  if (diagnosis === 'lock_timeout' || diagnosis === 'statement_timeout') return new DatabaseTimeoutError(diagnosis, cause);
  return undefined;
}

/**
 * The write policy. Its decisions, by kind of write and what PostgreSQL said (db.diagnose, and
 * db-outcome.js's outcomeInDoubt):
 * - batch, alone, slow: a passing failure (transient) is tried once more; any other is answered at
 *   once: its 503 (refusalOfDatabaseState) or, the write's own, as it is (500). The second attempt's
 *   failure is answered the same way, except that when the first may have been written, it is
 *   outcome_unknown whatever the second says.
 * - group: the database's state (unavailable, statement_timeout, in doubt) is every request's 503;
 *   a lock timeout is too when the whole table is locked (isTableLocked: each would be locked out
 *   alone as well); any other failure, a lock on one row included, writes each request alone.
 * - stream: never tried again (its body is gone): a passing failure is database_unavailable.
 * - a request locked out alone (its lock_timeout) waits in the slow lane when a slot is free,
 *   else gets its 503 lock_timeout at once.
 * Time limits: group and alone wait GROUP_LOCK_TIMEOUT_MS (at most DB_LOCK_TIMEOUT_MS) for a locked
 * row; batch and slow run under the defaults; a stream under STREAM_LIMITS.
 *
 * @param {{ diagnose: (err: unknown) => Promise<import('../db/database.js').Diagnosis>, isTableLocked?: () => Promise<boolean> }} db
 * @param {{ lockTimeoutMs?: number }} [options]  lockTimeoutMs: DB_LOCK_TIMEOUT_MS, which a group's
 *   lock timeout never exceeds; without it, groups wait as long as any write
 */
export function createWritePolicy({ diagnose, isTableLocked = async () => false }, { lockTimeoutMs } = {}) {
  const groupLockTimeoutMs = lockTimeoutMs === undefined ? undefined : Math.min(lockTimeoutMs, GROUP_LOCK_TIMEOUT_MS);
  const brief = groupLockTimeoutMs ? Object.freeze({ lockTimeoutMs: groupLockTimeoutMs }) : undefined;
  /** @type {Readonly<Record<WriteKind, Readonly<import('../db/transaction-settings.js').TimeLimits> | undefined>>} */
  const limits = Object.freeze({ batch: undefined, group: brief, alone: brief, slow: undefined, stream: STREAM_LIMITS });

  return {
    /**
     * The time limits a kind of write runs under: overrides of the transaction settings' defaults
     * (undefined: the defaults).
     * @param {WriteKind} kind
     */
    limits: (kind) => limits[kind],

    /**
     * What to do after a write of `kind` failed with `err`.
     * @param {WriteKind} kind @param {unknown} err
     * @param {unknown} [previous]  the first attempt's failure, when this was the second
     * @returns {Promise<Decision>}
     */
    async afterFailure(kind, err, previous) {
      const diagnosis = await diagnose(err);
      if (kind === 'stream') return fail(refusalOfDatabaseState(diagnosis === 'transient' ? 'unavailable' : diagnosis, err) ?? err);
      if (kind === 'group') {
        if (diagnosis === 'lock_timeout') return (await isTableLocked()) ? fail(refusalOfDatabaseState(diagnosis, err)) : EACH_ALONE;
        const refusal = refusalOfDatabaseState(diagnosis, err);
        return refusal ? fail(refusal) : EACH_ALONE;
      }
      if (previous === undefined) return diagnosis === 'transient' ? RETRY : fail(refusalOfDatabaseState(diagnosis, err) ?? err);
      // Tried again (safe even when the first may have been written: a replay writes nothing
      // twice); but if the first may have been written, no failure of the second can say nothing was.
      const refusal = refusalOfDatabaseState(diagnosis, err) ?? err;
      return fail(!outcomeInDoubt(previous) || refusal instanceof OutcomeUnknownError ? refusal : new OutcomeUnknownError(previous));
    },

    /**
     * Whether a request written alone that failed with `err` (its answer, after afterFailure) goes
     * to the slow lane: it was locked out by another writer for the brief lock timeout only, and a
     * slow-lane slot is free. Otherwise its answer is `err` (a lock_timeout: 503 at once).
     * @param {unknown} err @param {boolean} slotFree
     */
    goesSlow: (err, slotFree) => slotFree && err instanceof DatabaseTimeoutError && err.code === 'lock_timeout',
  };
}

/** @typedef {ReturnType<typeof createWritePolicy>} WritePolicy */
