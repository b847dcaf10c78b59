import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Lending } from '../../src/db/lending.js';
import { DatabaseUnavailableError, OutcomeUnknownError } from '../../src/errors.js';
import { createWritePolicy, refusalOfDatabaseState } from '../../src/users/write-policy.js';

/** @param {import('../../src/db/database.js').Diagnosis} diagnosis */
const policyOf = (diagnosis) => createWritePolicy({ diagnose: async () => diagnosis });
const failure = () => Object.assign(new Error('from the database'), { code: 'XX000' });

/** `err` as a lending hands it on once its statement (outside BEGIN) was sent: the write may have been committed. @param {Error} err */
function inDoubt(err) {
  const lending = new Lending(/** @type {any} */ ({ query: async () => {} }), {
    socket: { destroyed: false },
  });
  void lending.query('INSERT INTO users ...');
  return lending.handOn(err);
}

/** @param {import('../../src/users/write-types.js').Decision} d */
const refusalIn = (d) => (d.then === 'fail' ? d.err : undefined);

describe('the write policy keeps the refusal it was given, and the cause it names (unit)', () => {
  test('a failure that is already the 503 is answered as it is, not wrapped again', async () => {
    const unknown = new OutcomeUnknownError(failure());
    assert.equal(refusalOfDatabaseState('transient', inDoubt(unknown)), unknown);
    assert.equal(
      refusalIn(await policyOf('unavailable').afterFailure('batch', inDoubt(unknown))),
      unknown,
    );
    const unavailable = new DatabaseUnavailableError(failure());
    assert.equal(refusalOfDatabaseState('unavailable', unavailable), unavailable);
    assert.equal(
      refusalIn(await policyOf('unavailable').afterFailure('batch', unavailable)),
      unavailable,
    );
    assert.equal(
      refusalIn(await policyOf('unavailable').afterFailure('group', unavailable)),
      unavailable,
    );
  });

  test('both attempts in doubt: the outcome_unknown names the second failure, the latest word on the row', async () => {
    const first = inDoubt(failure());
    const second = failure();
    for (const diagnosis of /** @type {const} */ (['transient', 'unavailable'])) {
      const refusal = refusalIn(
        await policyOf(diagnosis).afterFailure('batch', inDoubt(second), first),
      );
      assert.ok(refusal instanceof OutcomeUnknownError, diagnosis);
      assert.equal(refusal.cause, second, diagnosis);
    }
  });
});
