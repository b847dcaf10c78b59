import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { toBatchItemFailures } from '../../src/batch-response.js';

describe('toBatchItemFailures (unit)', () => {
  test('nothing failed: an empty list, which tells Lambda to delete the whole batch', () => {
    assert.deepEqual(toBatchItemFailures([]), { batchItemFailures: [] });
  });

  test('one entry per failed message id, in the order given, from any iterable', () => {
    const expected = { batchItemFailures: [{ itemIdentifier: 'm-2' }, { itemIdentifier: 'm-7' }] };
    assert.deepEqual(toBatchItemFailures(['m-2', 'm-7']), expected);
    assert.deepEqual(toBatchItemFailures(new Set(['m-2', 'm-7'])), expected);
    assert.deepEqual(
      toBatchItemFailures(
        new Map([
          ['m-2', 'poison'],
          ['m-7', 'unavailable'],
        ]).keys(),
      ),
      expected,
    );
  });
});
