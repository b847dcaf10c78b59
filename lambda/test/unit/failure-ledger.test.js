import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { createFailureLedger, poison } from '../../src/failure-ledger.js';
import { makeRecord } from '../support/sqs-events.js';

/** A FIFO batch as Lambda hands it over: records of the groups given, in queue order. @param {(string | undefined)[]} groups */
const batchOf = (groups) =>
  groups.map((group, i) =>
    makeRecord({ email: `u${i}@example.com`, name: 'U' }, { messageId: `m${i}`, group }),
  );
const refused = poison('HTTP 400 invalid_batch');
const outage = /** @type {const} */ ({ kind: 'unavailable', reason: 'HTTP 503' });

/** @param {(string | undefined)[]} groups @param {[number, import('../../src/failure-ledger.js').Failure][]} failures */
function ledgerOf(groups, failures) {
  const ledger = createFailureLedger(batchOf(groups));
  for (const [i, failure] of failures) ledger.fail(`m${i}`, failure);
  return ledger;
}

describe('the failure ledger (unit)', () => {
  test('a failure holds back the later messages of its group only; the earlier ones and other groups are left alone', () => {
    const ledger = ledgerOf(['a', 'b', 'a', 'a', 'b', 'c'], [[2, refused]]);
    const failed = ledger.failures();
    assert.deepEqual([...failed.keys()], ['m2', 'm3']);
    assert.deepEqual(failed.get('m3'), {
      kind: 'held',
      reason: 'an earlier message of its group failed (m2)',
    });
    assert.deepEqual(failed.get('m2'), refused, 'a failure of its own keeps its kind and reason');
    assert.deepEqual(['m0', 'm1', 'm2', 'm3', 'm4', 'm5'].map(ledger.hasFailed), [
      false,
      false,
      true,
      true,
      false,
      false,
    ]);
    assert.equal(ledger.fifo, true);
  });

  test("a standard queue's records (no group) fail alone", () => {
    const ledger = ledgerOf([undefined, undefined, undefined], [[0, refused]]);
    assert.equal(ledger.fifo, false);
    assert.deepEqual([...ledger.failures().keys()], ['m0']);
    assert.deepEqual(['m0', 'm1', 'm2'].map(ledger.hasFailed), [true, false, false]);
  });

  test('a failure never replaces poison; poison replaces another failure', () => {
    const ledger = ledgerOf(
      [undefined, undefined],
      [
        [0, refused],
        [0, outage],
        [1, outage],
        [1, refused],
      ],
    );
    assert.deepEqual(
      ledger.failures(),
      new Map([
        ['m0', refused],
        ['m1', refused],
      ]),
    );
  });

  test('failures found out of order: the group is held behind its first failed message in the batch', () => {
    const ledger = ledgerOf(
      ['a', 'a', 'a', 'a'],
      [
        [2, outage],
        [1, refused],
      ],
    );
    assert.deepEqual(
      ledger.failures(),
      new Map([
        ['m1', refused],
        ['m2', outage],
        ['m3', { kind: 'held', reason: 'an earlier message of its group failed (m1)' }],
      ]),
    );
    assert.equal(ledger.hasFailed('m0'), false, 'before the first failure: not held');
  });

  test('a held message that fails on its own is reported with its own failure', () => {
    const ledger = ledgerOf(
      ['a', 'a'],
      [
        [0, refused],
        [1, outage],
      ],
    );
    assert.deepEqual(ledger.failures().get('m1'), outage);
  });

  test('for any batch and any failures: each group fails from its first failure on, and nothing else fails', () => {
    const batch = fc.array(
      fc.option(fc.constantFrom('a', 'b', 'c', 'd'), { nil: undefined, freq: 5 }),
      { minLength: 1, maxLength: 10 },
    );
    fc.assert(
      fc.property(
        batch.chain((groups) =>
          fc.tuple(fc.constant(groups), fc.shuffledSubarray(groups.map((_, i) => i))),
        ),
        ([groups, failing]) => {
          const ledger = ledgerOf(
            groups,
            failing.map((i) => [i, refused]),
          );
          const expected = groups.flatMap((group, i) => {
            if (failing.includes(i)) return [`m${i}`];
            const firstFailure = groups.findIndex((g, j) => g === group && failing.includes(j));
            return group !== undefined && firstFailure !== -1 && firstFailure < i ? [`m${i}`] : [];
          });
          const failed = ledger.failures();
          assert.deepEqual([...failed.keys()], expected, "in the batch's order");
          assert.deepEqual(
            groups.map((_, i) => ledger.hasFailed(`m${i}`)),
            groups.map((_, i) => expected.includes(`m${i}`)),
          );
          for (const i of failing)
            assert.equal(failed.get(`m${i}`), refused, 'own failures are kept as they were');
          for (const id of expected.filter((id) => !failing.includes(Number(id.slice(1))))) {
            const i = Number(id.slice(1));
            const first = groups.findIndex((g, j) => g === groups[i] && failing.includes(j));
            assert.equal(
              failed.get(id)?.reason,
              `an earlier message of its group failed (m${first})`,
            );
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
