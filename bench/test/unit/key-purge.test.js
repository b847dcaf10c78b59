import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { keySampleTable, keyTableFlatness, warmupEnd } from '../../lib/key-purge-report.js';

/**
 * A sample every 10 s of a 10-minute run, its rows and size from `keys(t)` and `bytes(t)`.
 * @param {(t: number) => number} keys @param {(t: number) => number} bytes @returns {import('../../lib/key-purge-report.js').KeySample[]}
 */
const samples = (keys, bytes) =>
  Array.from({ length: 60 }, (_, i) => {
    const t = (i + 1) * 10;
    return {
      t,
      keys: keys(t),
      expired: 100,
      bytes: bytes(t),
      deadRows: 5000,
      autovacuums: Math.floor(t / 60),
      keysPerSec: 1000,
    };
  });
const MiB = 2 ** 20;
const options = { warmupS: 120, tolerance: 1.25 };

describe("the purge soak's verdict (unit)", () => {
  test('rows and a size that saw between autovacuum runs around a level are flat', () => {
    const verdict = keyTableFlatness(
      samples(
        (t) => 5000 + (t % 30) * 10,
        (t) => (20 + (t % 60) / 10) * MiB,
      ),
      options,
    );
    assert.equal(verdict?.flat, true);
    assert.equal(verdict?.samples, 48, 'the warm-up left out: the samples after 120 s');
    assert.equal(verdict?.perThird, 16);
    assert.equal(verdict?.keys.ratio, 1);
  });

  test('a size that keeps growing (the purge falling behind, or no vacuum) is not flat, nor are rows', () => {
    const growing = keyTableFlatness(
      samples(
        () => 5000,
        (t) => (20 + t / 10) * MiB,
      ),
      options,
    );
    assert.equal(growing?.flat, false);
    assert.ok(/** @type {number} */ (growing?.bytes.ratio) > 1.25);
    assert.equal(growing?.keys.ratio, 1);
    const rows = keyTableFlatness(
      samples(
        (t) => 1000 * t,
        () => 20 * MiB,
      ),
      options,
    );
    assert.equal(rows?.flat, false);
  });

  test('the growth before the warm-up ends is left out; the last third is judged by its maximum, one peak included', () => {
    assert.equal(
      keyTableFlatness(
        samples(
          () => 5000,
          (t) => (t <= 120 ? t / 6 : 20) * MiB,
        ),
        options,
      )?.flat,
      true,
    );
    assert.equal(
      keyTableFlatness(
        samples(
          () => 5000,
          (t) => (t === 600 ? 40 : 20) * MiB,
        ),
        options,
      )?.flat,
      false,
    );
  });

  test('fewer than three samples after the warm-up: no verdict', () => {
    assert.equal(
      keyTableFlatness(
        samples(
          () => 1,
          () => 1,
        ).slice(0, 14),
        options,
      ),
      undefined,
    );
    assert.notEqual(
      keyTableFlatness(
        samples(
          () => 1,
          () => 1,
        ).slice(0, 15),
        options,
      ),
      undefined,
    );
  });

  test('the warm-up lasts until the first autovacuum of the table, if that comes later; none ran, no end', () => {
    const run = samples(
      () => 5000,
      () => 20 * MiB,
    );
    assert.equal(warmupEnd(run, 120), 120, 'the first ran at 60 s');
    assert.equal(warmupEnd(run, 30), 60);
    assert.equal(
      warmupEnd(
        run.map((s) => ({ ...s, autovacuums: 0 })),
        120,
      ),
      undefined,
    );
  });

  test('the table shows each sample, its size in MiB', () => {
    const table = keySampleTable(
      samples(
        () => 5000,
        () => 20 * MiB,
      ).slice(0, 2),
    ).split('\n');
    assert.equal(table.length, 4);
    assert.equal(table[2], '| 0:10 | 5,000 | 100 | 20.0 | 5,000 | 0 | 1,000 |');
  });
});
