import { isStatementPooling, outcomeInDoubt } from '../db/lending.js';
import {
  ApiError,
  DatabaseTimeoutError,
  DatabaseUnavailableError,
  OutcomeUnknownError,
} from '../errors.js';

// What a failed write means and what happens next, and the time limits of each kind of write,
// decided here for every writer; the writers carry the decisions out.

/**
 * A group's lock wait: one locked email must not hold back its statement (never over
 * DB_LOCK_TIMEOUT_MS).
 */
export const GROUP_LOCK_TIMEOUT_MS = 250;

/**
 * A streamed import's statements may run for minutes: no statement timeout (the watchdog still
 * cuts).
 * @type {Readonly<import('../db/transaction-settings.js').TimeLimits>}
 */
export const STREAM_LIMITS = Object.freeze({ statementTimeoutMs: 0 });

/**
 * batch: a request alone; group: several in one statement; alone: a request of a failed group;
 * slow: the slow lane; stream: an import.
 * @typedef {'batch' | 'group' | 'alone' | 'slow' | 'stream'} WriteKind
 */
/**
 * @typedef {{ then: 'retry' } | { then: 'each_alone' } | { then: 'fail', err: unknown }} Decision
 */

const RETRY = Object.freeze({ then: 'retry' });
const EACH_ALONE = Object.freeze({ then: 'each_alone' });
/** @param {unknown} err @returns {Decision} */
const fail = (err) => ({ then: 'fail', err });

/**
 * The 503 of a failure from the database's state (or undefined); outcome_unknown whenever it may
 * have committed.
 * @param {import('../db/database.js').Diagnosis} diagnosis
 * @param {unknown} cause
 * @returns {DatabaseUnavailableError | DatabaseTimeoutError | OutcomeUnknownError | undefined}
 */
export function refusalOfDatabaseState(diagnosis, cause) {
  if (outcomeInDoubt(cause))
    return cause instanceof OutcomeUnknownError ? cause : new OutcomeUnknownError(cause);
  if (diagnosis === 'unavailable')
    return cause instanceof DatabaseUnavailableError ? cause : new DatabaseUnavailableError(cause);
  if (diagnosis === 'lock_timeout' || diagnosis === 'statement_timeout')
    return new DatabaseTimeoutError(diagnosis, cause);
  return undefined;
}

/**
 * The write policy: batch, alone and slow retry a transient failure once, else answer its 503 or
 * the failure itself (a first attempt in doubt keeps the answer outcome_unknown); a group answers
 * the database's state to every request (a lock timeout only when the whole table is locked) and
 * writes each alone otherwise; a stream never retries. Group and alone wait GROUP_LOCK_TIMEOUT_MS.
 * @param {{ diagnose: (err: unknown) => Promise<import('../db/database.js').Diagnosis>,
 *   isTableLocked?: () => Promise<boolean> }} db
 * @param {{ lockTimeoutMs?: number }} [options]  DB_LOCK_TIMEOUT_MS, which a group's never exceeds
 */
export function createWritePolicy(
  { diagnose, isTableLocked = async () => false },
  { lockTimeoutMs } = {},
) {
  const groupLockTimeoutMs =
    lockTimeoutMs === undefined ? undefined : Math.min(lockTimeoutMs, GROUP_LOCK_TIMEOUT_MS);
  const brief = groupLockTimeoutMs
    ? Object.freeze({ lockTimeoutMs: groupLockTimeoutMs })
    : undefined;
  /**
   * @type {Readonly<Record<WriteKind,
   *   Readonly<import('../db/transaction-settings.js').TimeLimits> | undefined>>}
   */
  const limits = Object.freeze({
    batch: undefined,
    group: brief,
    alone: brief,
    slow: undefined,
    stream: STREAM_LIMITS,
  });

  return {
    /**
     * The overrides of the settings' defaults a kind of write runs under.
     * @param {WriteKind} kind
     */
    limits: (kind) => limits[kind],

    /**
     * @param {WriteKind} kind
     * @param {unknown} err
     * @param {unknown} [previous] the first attempt's failure
     * @returns {Promise<Decision>}
     */
    async afterFailure(kind, err, previous) {
      // A pooler in statement mode refused the transaction: trying again cannot help.
      if (isStatementPooling(err))
        return fail(new ApiError('statement_pooling', undefined, { cause: err }));
      const diagnosis = await diagnose(err);
      if (kind === 'stream')
        return fail(
          refusalOfDatabaseState(diagnosis === 'transient' ? 'unavailable' : diagnosis, err) ?? err,
        );
      if (kind === 'group') {
        if (diagnosis === 'lock_timeout')
          return (await isTableLocked())
            ? fail(refusalOfDatabaseState(diagnosis, err))
            : EACH_ALONE;
        const refusal = refusalOfDatabaseState(diagnosis, err);
        return refusal ? fail(refusal) : EACH_ALONE;
      }
      if (previous === undefined)
        return diagnosis === 'transient'
          ? RETRY
          : fail(refusalOfDatabaseState(diagnosis, err) ?? err);
      // If the first may have been written, no failure of the second can say nothing was.
      const refusal = refusalOfDatabaseState(diagnosis, err) ?? err;
      return fail(
        !outcomeInDoubt(previous) || refusal instanceof OutcomeUnknownError
          ? refusal
          : new OutcomeUnknownError(previous),
      );
    },

    /**
     * A request locked out alone for the brief lock timeout waits in the slow lane when a slot is
     * free.
     * @param {unknown} err
     * @param {boolean} slotFree
     */
    goesSlow: (err, slotFree) =>
      slotFree && err instanceof DatabaseTimeoutError && err.code === 'lock_timeout',
  };
}

/** @typedef {ReturnType<typeof createWritePolicy>} WritePolicy */
