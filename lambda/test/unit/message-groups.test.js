import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { laterInGroup, withHeldFollowers } from '../../src/message-groups.js';
import { makeRecord } from '../support/sqs-events.js';

/** A FIFO batch as Lambda hands it over: records of groups g0..gn, in queue order. @param {(string | undefined)[]} groups */
const batchOf = (groups) => groups.map((group, i) => makeRecord({ email: `u${i}@example.com`, name: 'U' }, { messageId: `m${i}`, group }));
const poison = { kind: 'poison', reason: 'HTTP 400 invalid_batch' };

describe('message groups (unit): the FIFO failure rule', () => {
  test('a failure holds back the later messages of its group only; the earlier ones and other groups are left alone', () => {
    const records = batchOf(['a', 'b', 'a', 'a', 'b', 'c']);
    const failed = withHeldFollowers(records, new Map([['m2', poison]]));
    assert.deepEqual([...failed.keys()].sort(), ['m2', 'm3']);
    assert.deepEqual(failed.get('m3'), { kind: 'held', reason: 'an earlier message of its group failed (m2)' });
    assert.deepEqual(failed.get('m2'), poison, 'a failure of its own keeps its kind and reason');
  });

  test("a standard queue's records (no group) fail alone, as before", () => {
    const records = batchOf([undefined, undefined, undefined]);
    assert.equal(laterInGroup(records).size, 0);
    assert.deepEqual([...withHeldFollowers(records, new Map([['m0', poison]])).keys()], ['m0']);
  });

  test('for any batch and any failures: each group fails from its first failure on, and nothing else fails', () => {
    const batch = fc.array(fc.option(fc.constantFrom('a', 'b', 'c', 'd'), { nil: undefined, freq: 5 }), { minLength: 1, maxLength: 10 });
    fc.assert(
      fc.property(batch.chain((groups) => fc.tuple(fc.constant(groups), fc.subarray(groups.map((_, i) => i)))), ([groups, failing]) => {
        const records = batchOf(groups);
        const failed = withHeldFollowers(records, new Map(failing.map((i) => [`m${i}`, poison])));
        const expected = groups.flatMap((group, i) => {
          if (failing.includes(i)) return [`m${i}`];
          const firstFailure = groups.findIndex((g, j) => g === group && failing.includes(j));
          return group !== undefined && firstFailure !== -1 && firstFailure < i ? [`m${i}`] : [];
        });
        assert.deepEqual([...failed.keys()].sort(), expected.sort());
        for (const i of failing) assert.equal(failed.get(`m${i}`), poison, 'own failures are kept as they were');
      }),
      { numRuns: 500 },
    );
  });
});
