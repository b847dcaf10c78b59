import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { backoffMs, parseRetryAfter } from '../../src/retry.js';

const STEPS = { baseMs: 200, maxMs: 5000 };
const NOW = Date.UTC(2026, 10, 23, 12, 0, 0);

describe('backoffMs (unit)', () => {
  test('full jitter: the random draw scales the whole step, from 0 up to base × 2^attempt', () => {
    assert.equal(
      backoffMs(0, STEPS, () => 0),
      0,
    );
    assert.equal(
      backoffMs(0, STEPS, () => 0.5),
      100,
    );
    assert.equal(
      backoffMs(1, STEPS, () => 0.5),
      200,
    );
    assert.equal(
      backoffMs(3, STEPS, () => 0.5),
      800,
    );
  });

  test('the step stops growing at maxMs', () => {
    assert.equal(
      backoffMs(4, STEPS, () => 1),
      3200,
    );
    assert.equal(
      backoffMs(5, STEPS, () => 1),
      5000,
    );
    assert.equal(
      backoffMs(50, STEPS, () => 1),
      5000,
    );
  });

  test('any draw in [0, 1) gives a wait in [0, min(maxMs, base × 2^attempt))', () => {
    fc.assert(
      fc.property(
        fc.nat({ max: 60 }),
        fc.integer({ min: 1, max: 60_000 }),
        fc.integer({ min: 1, max: 300_000 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (attempt, baseMs, maxMs, draw) => {
          const wait = backoffMs(attempt, { baseMs, maxMs }, () => draw);
          const step = Math.min(maxMs, baseMs * 2 ** attempt);
          return wait >= 0 && wait < step;
        },
      ),
    );
  });

  test('Math.random is the default draw', () => {
    const waits = Array.from({ length: 200 }, () => backoffMs(2, STEPS));
    assert.ok(waits.every((w) => w >= 0 && w < 800));
    assert.ok(new Set(waits).size > 100, 'the waits are spread, not one value');
  });
});

describe('parseRetryAfter (unit)', () => {
  test('absent or empty: undefined', () => {
    assert.equal(parseRetryAfter(null, NOW), undefined);
    assert.equal(parseRetryAfter('', NOW), undefined);
  });

  test('delta-seconds, with surrounding spaces', () => {
    assert.equal(parseRetryAfter('0', NOW), 0);
    assert.equal(parseRetryAfter('2', NOW), 2000);
    assert.equal(parseRetryAfter(' 7 ', NOW), 7000);
  });

  test('an HTTP date: the time until then, or 0 once it has passed', () => {
    assert.equal(parseRetryAfter(new Date(NOW + 90_000).toUTCString(), NOW), 90_000);
    assert.equal(parseRetryAfter(new Date(NOW - 90_000).toUTCString(), NOW), 0);
  });

  test('unreadable values: undefined', () => {
    for (const header of ['soon', '5 seconds', '1e3', '0x10', '1.5', '-1'])
      assert.equal(parseRetryAfter(header, NOW), undefined, header);
  });

  test('any whole number of seconds is read exactly', () => {
    fc.assert(
      fc.property(
        fc.nat({ max: 10_000_000 }),
        fc.constantFrom('', ' ', '\t'),
        (seconds, pad) => parseRetryAfter(`${pad}${seconds}${pad}`, NOW) === seconds * 1000,
      ),
    );
  });

  test('any HTTP date is read as the milliseconds until it, never less than 0', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -10 * 365 * 86_400, max: 10 * 365 * 86_400 }),
        (offsetSeconds) => {
          const at = NOW + offsetSeconds * 1000;
          return parseRetryAfter(new Date(at).toUTCString(), NOW) === Math.max(0, at - NOW);
        },
      ),
    );
  });

  test('whatever a server sends, the answer is undefined or a wait of 0 or more, never NaN', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary-ascii', maxLength: 40 }), (header) => {
        const ms = parseRetryAfter(header, NOW);
        return ms === undefined || ms >= 0;
      }),
    );
  });
});
