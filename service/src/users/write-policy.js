import { classifyFailure } from '../db/failure.js';
import { isErasedWrite } from './erasure-guard.js';
import {
  ApiError,
  DatabaseTimeoutError,
  DatabaseUnavailableError,
  OutcomeUnknownError,
} from '../errors.js';

// What happens after a failed write, from what it means (db/failure.js and the database's
// diagnosis), and each kind of write's time limits: decided here, carried out by the writers.

/** @import { Decision, Diagnosis, TimeLimits, WriteKind } from './write-types.js' */

/** A group's lock wait: one locked email must not hold back its statement. */
export const GROUP_LOCK_TIMEOUT_MS = 250;

/** A stream may run for minutes: no statement timeout. @type {Readonly<TimeLimits>} */
export const STREAM_LIMITS = Object.freeze({ statementTimeoutMs: 0 });

const RETRY = Object.freeze({ then: 'retry' });
const EACH_ALONE = Object.freeze({ then: 'each_alone' });
/** @param {unknown} err @returns {Decision} */
const fail = (err) => ({ then: 'fail', err });

/**
 * The 503 of a failure from the database's state (or undefined); outcome_unknown whenever it may
 * have committed. @param {Diagnosis} diagnosis @param {unknown} failure
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
 * The overrides of the settings' defaults each kind of write runs under (a group's lock wait never
 * over DB_LOCK_TIMEOUT_MS). @param {number | undefined} lockTimeoutMs
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
 * The write policy (docs/architecture.md, "One request never fails another"): a request retries a
 * transient failure once; a group answers the database's state to all, else writes each alone.
 * @param {{ diagnose: (err: unknown) => Promise<Diagnosis>,
 *   isTableLocked?: () => Promise<boolean> }} db @param {{ lockTimeoutMs?: number }} [options]
 */
export function createWritePolicy(
  { diagnose, isTableLocked = async () => false },
  { lockTimeoutMs } = {},
) {
  const limits = limitsOfEachKind(lockTimeoutMs);
  return {
    /** @param {WriteKind} kind */
    limits: (kind) => limits[kind],

    /**
     * @param {WriteKind} kind @param {unknown} err @param {unknown} [previous]
     * @returns {Promise<Decision>}
     */
    async afterFailure(kind, err, previous) {
      // Not a failure: the writer leaves out what an erasure keeps out (without-erased.js).
      if (isErasedWrite(err)) return fail(err);
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
     * free. @param {unknown} err @param {boolean} slotFree
     */
    goesSlow: (err, slotFree) =>
      slotFree && err instanceof DatabaseTimeoutError && err.code === 'lock_timeout',
  };
}

/**
 * Its own answer, unless the first attempt may have been written: then it is outcome_unknown.
 * @param {Diagnosis} diagnosis @param {unknown} err @param {unknown} previous
 */
function secondRefusal(diagnosis, err, previous) {
  const refusal = refusalOfDatabaseState(diagnosis, err) ?? classifyFailure(err).error;
  const first = classifyFailure(previous);
  return !first.inDoubt || refusal instanceof OutcomeUnknownError
    ? refusal
    : new OutcomeUnknownError(first.error);
}

/** @typedef {ReturnType<typeof createWritePolicy>} WritePolicy */
