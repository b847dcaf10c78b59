import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Lending } from '../../src/db/lending.js';
import {
  DatabaseTimeoutError,
  DatabaseUnavailableError,
  OutcomeUnknownError,
} from '../../src/errors.js';
import {
  GROUP_LOCK_TIMEOUT_MS,
  STREAM_LIMITS,
  createWritePolicy,
} from '../../src/users/write-policy.js';

/** @typedef {import('../../src/db/database.js').Diagnosis} Diagnosis */

/** A policy over a fixed diagnosis. @param {Diagnosis} diagnosis @param {{ tableLocked?: boolean, lockTimeoutMs?: number }} [o] */
const policyOf = (diagnosis, { tableLocked = false, lockTimeoutMs } = {}) =>
  createWritePolicy(
    { diagnose: async () => diagnosis, isTableLocked: async () => tableLocked },
    { lockTimeoutMs },
  );

const failure = () => Object.assign(new Error('from the database'), { code: 'XX000' });

/** A failure after which the write may have been committed: lost once its statement (outside BEGIN) was sent, as the lending hands it on. @param {Error} [err] */
function inDoubt(err = new Error('Connection terminated unexpectedly')) {
  const lending = new Lending(
    { query: async () => /** @type {any} */ ({}) },
    { socket: { destroyed: false } },
  );
  void lending.query('INSERT INTO users ...');
  return lending.handOn(err);
}

/** @param {import('../../src/users/write-types.js').Decision} d */
const refusalIn = (d) => (d.then === 'fail' ? d.err : undefined);

describe('the write policy (unit)', () => {
  test('a request on its own: a passing failure is tried once more; any other is answered at once', async () => {
    for (const kind of /** @type {const} */ (['batch', 'alone', 'slow'])) {
      assert.deepEqual(
        await policyOf('transient').afterFailure(kind, failure()),
        { then: 'retry' },
        kind,
      );
      const own = failure();
      assert.equal(
        refusalIn(await policyOf('own').afterFailure(kind, own)),
        own,
        `${kind}: its own failure as it is (500)`,
      );
      assert.ok(
        refusalIn(await policyOf('unavailable').afterFailure(kind, failure())) instanceof
          DatabaseUnavailableError,
      );
      for (const timeout of /** @type {const} */ (['lock_timeout', 'statement_timeout'])) {
        const refusal = refusalIn(await policyOf(timeout).afterFailure(kind, failure()));
        assert.ok(
          refusal instanceof DatabaseTimeoutError && refusal.code === timeout,
          `${kind}: ${timeout}`,
        );
      }
    }
  });

  test('the second attempt: its own answer, unless the first may have been written (outcome_unknown)', async () => {
    const second = failure();
    assert.equal(
      refusalIn(await policyOf('transient').afterFailure('batch', second, failure())),
      second,
      'passing twice: its own failure',
    );
    assert.ok(
      refusalIn(
        await policyOf('unavailable').afterFailure('batch', failure(), failure()),
      ) instanceof DatabaseUnavailableError,
    );
    const lost = new Error('Connection terminated unexpectedly');
    const doubt = inDoubt(lost);
    for (const diagnosis of /** @type {const} */ ([
      'transient',
      'own',
      'unavailable',
      'lock_timeout',
    ])) {
      const refusal = refusalIn(await policyOf(diagnosis).afterFailure('batch', failure(), doubt));
      assert.ok(refusal instanceof OutcomeUnknownError && refusal.cause === lost, diagnosis);
    }
  });

  test('a first failure in doubt: tried again when passing, else outcome_unknown at once', async () => {
    assert.deepEqual(await policyOf('transient').afterFailure('batch', inDoubt()), {
      then: 'retry',
    });
    assert.ok(
      refusalIn(await policyOf('unavailable').afterFailure('batch', inDoubt())) instanceof
        OutcomeUnknownError,
    );
  });

  test("a group: the database's state is every request's 503; anything else writes each alone", async () => {
    assert.deepEqual(await policyOf('own').afterFailure('group', failure()), {
      then: 'each_alone',
    });
    assert.deepEqual(await policyOf('transient').afterFailure('group', failure()), {
      then: 'each_alone',
    });
    assert.deepEqual(
      await policyOf('lock_timeout').afterFailure('group', failure()),
      { then: 'each_alone' },
      'one locked row: each alone',
    );
    const locked = refusalIn(
      await policyOf('lock_timeout', { tableLocked: true }).afterFailure('group', failure()),
    );
    assert.ok(
      locked instanceof DatabaseTimeoutError && locked.code === 'lock_timeout',
      'the whole table locked: every request',
    );
    const timedOut = refusalIn(
      await policyOf('statement_timeout').afterFailure('group', failure()),
    );
    assert.ok(timedOut instanceof DatabaseTimeoutError && timedOut.code === 'statement_timeout');
    assert.ok(
      refusalIn(await policyOf('unavailable').afterFailure('group', failure())) instanceof
        DatabaseUnavailableError,
    );
    assert.ok(
      refusalIn(await policyOf('transient').afterFailure('group', inDoubt())) instanceof
        OutcomeUnknownError,
    );
  });

  test('a stream is never tried again: a passing failure is database_unavailable', async () => {
    assert.ok(
      refusalIn(await policyOf('transient').afterFailure('stream', failure())) instanceof
        DatabaseUnavailableError,
    );
    const own = failure();
    assert.equal(refusalIn(await policyOf('own').afterFailure('stream', own)), own);
    assert.ok(
      refusalIn(await policyOf('transient').afterFailure('stream', inDoubt())) instanceof
        OutcomeUnknownError,
    );
  });

  test('a request locked out alone goes to the slow lane when a slot is free; nothing else does', () => {
    const policy = policyOf('own');
    const lockedOut = new DatabaseTimeoutError('lock_timeout', failure());
    assert.equal(policy.goesSlow(lockedOut, true), true);
    assert.equal(
      policy.goesSlow(lockedOut, false),
      false,
      'the slow lane full: 503 lock_timeout at once',
    );
    assert.equal(
      policy.goesSlow(new DatabaseTimeoutError('statement_timeout', failure()), true),
      false,
    );
    assert.equal(policy.goesSlow(new OutcomeUnknownError(failure()), true), false);
  });

  test('time limits: a group and its requests alone wait briefly for a row; the others under the defaults; a stream without a statement timeout', () => {
    const policy = policyOf('own', { lockTimeoutMs: 3000 });
    assert.deepEqual(policy.limits('group'), { lockTimeoutMs: GROUP_LOCK_TIMEOUT_MS });
    assert.deepEqual(policy.limits('alone'), { lockTimeoutMs: GROUP_LOCK_TIMEOUT_MS });
    assert.equal(policy.limits('batch'), undefined);
    assert.equal(policy.limits('slow'), undefined);
    assert.equal(policy.limits('stream'), STREAM_LIMITS);
    assert.deepEqual(STREAM_LIMITS, { statementTimeoutMs: 0 });
    assert.deepEqual(
      policyOf('own', { lockTimeoutMs: 100 }).limits('group'),
      { lockTimeoutMs: 100 },
      'never longer than DB_LOCK_TIMEOUT_MS',
    );
    assert.equal(
      policyOf('own').limits('group'),
      undefined,
      'without DB_LOCK_TIMEOUT_MS, the defaults',
    );
  });
});
