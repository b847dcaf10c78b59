import { classifyFailure } from '../db/failure.js';
import {
  ApiError,
  DatabaseTimeoutError,
  DatabaseUnavailableError,
  OutcomeUnknownError,
} from '../errors.js';

// What happens after a failed write, from what it means (db/failure.js and the database's
// diagnosis), and the time limits of each kind of write, decided here for every writer; the
// writers carry the decisions out.

/** @typedef {import('../db/transaction-settings.js').TimeLimits} TimeLimits */
/** @typedef {import('../db/database.js').Diagnosis} Diagnosis */

/**
 * A group's lock wait: one locked email must not hold back its statement (never over
 * DB_LOCK_TIMEOUT_MS).
 */
export const GROUP_LOCK_TIMEOUT_MS = 250;

/**
 * A streamed import's statements may run for minutes: no statement timeout (the watchdog still
 * cuts).
 * @type {Readonly<TimeLimits>}
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
 * have committed. Its cause: the failure as it came.
 * @param {Diagnosis} diagnosis
 * @param {unknown} failure
 * @returns {DatabaseUnavailableError | DatabaseTimeoutError | OutcomeUnknownError | undefined}
 */
export function refusalOfDatabaseState(diagnosis, failure) {
  const { error: cause, inDoubt } = classifyFailure(failure);
  if (inDoubt) return cause instanceof OutcomeUnknownError ? cause : new OutcomeUnknownError(cause);
  if (diagnosis === 'unavailable')
    return cause instanceof DatabaseUnavailableError ? cause : new DatabaseUnavailableError(cause);
  if (diagnosis === 'lock_timeout' || diagnosis === 'statement_timeout')
    return new DatabaseTimeoutError(diagnosis, cause);
  return undefined;
}

/**
 * The overrides of the settings' defaults each kind of write runs under: a group and its requests
 * alone wait GROUP_LOCK_TIMEOUT_MS for a row (never over DB_LOCK_TIMEOUT_MS); a stream sets no
 * statement timeout.
 * @param {number | undefined} lockTimeoutMs
 * @returns {Readonly<Record<WriteKind, Readonly<TimeLimits> | undefined>>}
 */
function limitsOfEachKind(lockTimeoutMs) {
  const groupLockTimeoutMs =
    lockTimeoutMs === undefined ? undefined : Math.min(lockTimeoutMs, GROUP_LOCK_TIMEOUT_MS);
  const brief = groupLockTimeoutMs
    ? Object.freeze({ lockTimeoutMs: groupLockTimeoutMs })
    : undefined;
  return Object.freeze({
    batch: undefined,
    group: brief,
    alone: brief,
    slow: undefined,
    stream: STREAM_LIMITS,
  });
}

/**
 * The write policy: batch, alone and slow retry a transient failure once, else answer its 503 or
 * the failure itself (a first attempt in doubt keeps the answer outcome_unknown); a group answers
 * the database's state to every request (a lock timeout only when the whole table is locked) and
 * writes each alone otherwise; a stream never retries. Group and alone wait GROUP_LOCK_TIMEOUT_MS.
 * @param {{ diagnose: (err: unknown) => Promise<Diagnosis>,
 *   isTableLocked?: () => Promise<boolean> }} db
 * @param {{ lockTimeoutMs?: number }} [options]  DB_LOCK_TIMEOUT_MS, which a group's never exceeds
 */
export function createWritePolicy(
  { diagnose, isTableLocked = async () => false },
  { lockTimeoutMs } = {},
) {
  const limits = limitsOfEachKind(lockTimeoutMs);
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
      const failure = classifyFailure(err);
      // A pooler in statement mode refused the transaction: trying again cannot help.
      if (failure.statementPooling)
        return fail(new ApiError('statement_pooling', undefined, { cause: failure.error }));
      const diagnosis = await diagnose(err);
      if (kind === 'stream')
        return fail(
          refusalOfDatabaseState(diagnosis === 'transient' ? 'unavailable' : diagnosis, err) ??
            failure.error,
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
          : fail(refusalOfDatabaseState(diagnosis, err) ?? failure.error);
      return fail(secondRefusal(diagnosis, err, previous));
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

/**
 * A second attempt's answer: its own, unless the first may have been written (then no failure of
 * the second can say nothing was).
 * @param {Diagnosis} diagnosis
 * @param {unknown} err @param {unknown} previous
 */
function secondRefusal(diagnosis, err, previous) {
  const refusal = refusalOfDatabaseState(diagnosis, err) ?? classifyFailure(err).error;
  const first = classifyFailure(previous);
  return !first.inDoubt || refusal instanceof OutcomeUnknownError
    ? refusal
    : new OutcomeUnknownError(first.error);
}

/** @typedef {ReturnType<typeof createWritePolicy>} WritePolicy */
