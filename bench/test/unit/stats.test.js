import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { median, percentile, range } from '../../lib/stats.js';

const numbers = fc.array(fc.double({ noNaN: true, noDefaultInfinity: true, min: -1e9, max: 1e9 }), {
  minLength: 1,
  maxLength: 50,
});

describe("the benchmarks' statistics (unit)", () => {
  test('median', () => {
    assert.equal(median([3, 1, 2]), 2);
    assert.equal(median([4, 1, 2, 3]), 2.5);
  });

  test('an even count: the mean of the two middle values, not the upper one (what db-alone, hot-path and the soak quoted before)', () => {
    assert.equal(median([10, 1, 2, 20]), 6);
    assert.equal(median([1, 2]), 1.5);
    assert.ok(Number.isNaN(median([])));
  });

  test("a median lies within the range, and neither sorts the caller's array", () => {
    fc.assert(
      fc.property(numbers, (xs) => {
        const before = [...xs];
        const { min, max } = range(xs);
        const m = median(xs);
        assert.ok(min <= m && m <= max, `${min} <= ${m} <= ${max}`);
        assert.equal(min, Math.min(...xs));
        assert.equal(max, Math.max(...xs));
        assert.deepEqual(xs, before);
      }),
    );
  });

  test('range', () => {
    assert.deepEqual(range([5.35, 4.32, 5.92]), { min: 4.32, max: 5.92 });
    assert.deepEqual(range([]), { min: NaN, max: NaN });
    assert.deepEqual(
      range(Array.from({ length: 300_000 }, (_, i) => i)),
      { min: 0, max: 299_999 },
      'no spread of the values into arguments',
    );
  });

  test('percentile: the nearest rank, always a value measured; none of nothing', () => {
    const ms = [...Array.from({ length: 100 }, (_, i) => i + 1), 0.1, 0.2, 0.3];
    assert.equal(percentile(ms, 0.99), 99, 'the 102nd smallest of 103');
    assert.equal(percentile(ms, 1), 100);
    assert.equal(percentile(ms, 0), 0.1);
    assert.equal(percentile([7], 0.5), 7);
    assert.equal(percentile([], 0.99), undefined);
    fc.assert(
      fc.property(numbers, fc.double({ min: 0, max: 1, noNaN: true }), (xs, q) => {
        assert.ok(xs.includes(/** @type {number} */ (percentile(xs, q))));
      }),
    );
  });
});
