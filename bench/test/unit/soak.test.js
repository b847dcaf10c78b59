import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseUserBatch } from '../../../service/src/users/user-schema.js';
import { EMAIL_DOMAIN, Ledger } from '../../lib/soak-ledger.js';
import { rssGrowth, soakChart, soakTable } from '../../lib/soak-report.js';
import { MAX_IN_FLIGHT, WindowStats, groupUsers } from '../../lib/soak-traffic.js';

/**
 * A sample every 10 s of a 10-minute run, RSS from `rss(t)`.
 * @param {(t: number) => number} rss @returns {import('../../lib/soak-report.js').Sample[]}
 */
const samples = (rss) =>
  Array.from({ length: 60 }, (_, i) => {
    const t = (i + 1) * 10;
    return {
      t,
      pgDown: t === 300,
      rssMiB: rss(t),
      cpuPercent: 12,
      heapMiB: 20,
      eldP99Ms: 1.7,
      requests: 1630,
      reqPerSec: 163,
      usersPerSec: 3160,
      p99Ms: 12,
      p99SingleMs: 8,
      p99BatchMs: 30,
      ok: 1630,
      invalid: 0,
      unavailable: t === 300 ? 59 : 0,
      other: 0,
      network: 0,
    };
  });

describe("the soak's traffic (unit)", () => {
  test("a group is always the same users for the same prefix, every one valid by the service's own schema", () => {
    const users = groupUsers('b7', 6);
    assert.deepEqual(groupUsers('b7', 6), users);
    assert.deepEqual(
      users.map((u) => u.email),
      [0, 1, 2, 3, 4, 5].map((i) => `b7-${i}@${EMAIL_DOMAIN}`),
    );
    assert.deepEqual(
      users.map((u) => 'phone' in u),
      [false, true, false, true, false, true],
    );
    assert.deepEqual(
      users.map((u) => 'passwordHash' in u),
      [true, false, false, true, false, false],
    );
    assert.equal(parseUserBatch(groupUsers('b8', 1000)).length, 1000);
  });

  test('at most 21 requests in flight, as docs/benchmarks.md says', () => {
    assert.equal(MAX_IN_FLIGHT, 21);
  });

  test("a window's figures: statuses by kind, p99s, rates; then a fresh window", () => {
    const stats = new WindowStats();
    for (let i = 1; i <= 100; i++)
      stats.record('single', { status: 201, ms: i, body: { inserted: 1 } });
    stats.record('batch', { status: 200, ms: 500, body: { inserted: 0 } });
    stats.record('invalid', { status: 400, ms: 40 });
    stats.record('batch', { status: 503, ms: 2, retryAfterSeconds: 2 });
    stats.record('single', { status: 429, ms: 3 });
    stats.record('replay', { status: 0, ms: 30_000, error: 'UND_ERR_HEADERS_TIMEOUT' });
    stats.record('single', { status: 500, ms: 9 });
    const w = stats.take(10);
    assert.deepEqual(
      {
        requests: w.requests,
        ok: w.ok,
        invalid: w.invalid,
        unavailable: w.unavailable,
        network: w.network,
        other: w.other,
      },
      { requests: 106, ok: 101, invalid: 1, unavailable: 2, network: 1, other: 1 },
    );
    assert.equal(w.reqPerSec, 10.6);
    assert.equal(w.usersPerSec, 10);
    assert.equal(
      w.p99SingleMs,
      99,
      'the 99th of 103 single-user latencies, 1 to 100 ms and three fast failures',
    );
    assert.equal(w.p99BatchMs, 500);
    assert.equal(w.p99Ms, 500);
    const next = stats.take(10);
    assert.equal(next.requests, 0);
    assert.equal(next.p99Ms, undefined);
  });
});

describe("the soak's ledger (unit)", () => {
  test('counts groups and users by state; only acknowledged valid groups are replayed', () => {
    const ledger = new Ledger();
    assert.equal(ledger.randomAcked(), undefined, 'nothing to replay before the first answer');
    ledger.settle('s0', 1, 'acked');
    ledger.settle('b0', 1000, 'acked');
    ledger.settle('x0', 1000, 'acked', { replayable: false });
    ledger.settle('b1', 1000, 'refused');
    ledger.settle('b2', 1000, 'doubt');
    assert.deepEqual(ledger.count('acked'), { groups: 3, users: 2001 });
    assert.deepEqual(ledger.count('refused'), { groups: 1, users: 1000 });
    assert.deepEqual(ledger.count('doubt'), { groups: 1, users: 1000 });
    const replayed = new Set(Array.from({ length: 200 }, () => ledger.randomAcked()?.prefix));
    assert.deepEqual([...replayed].sort(), ['b0', 's0']);
  });
});

describe("the soak's report (unit)", () => {
  test('flat memory reads as no growth; a leak of 1 MiB a minute reads as one', () => {
    const flat = rssGrowth(
      samples(() => 113),
      600,
    );
    assert.deepEqual(
      flat && {
        growthMiB: flat.growthMiB,
        slope: flat.slopeMiBPerMin,
        from: flat.fromMinute,
        to: flat.toMinute,
      },
      { growthMiB: 0, slope: 0, from: 2, to: 10 },
    );
    const leak = rssGrowth(
      samples((t) => 100 + t / 60),
      600,
    );
    assert.ok(leak, 'a figure');
    assert.ok(Math.abs(leak.slopeMiBPerMin - 1) < 1e-9, `slope ${leak.slopeMiBPerMin}`);
    assert.ok(Math.abs(leak.growthMiB - 7.5) < 0.6, `growth ${leak.growthMiB}`);
  });

  test('a steady climb still shows in the slope when a GC drops the last samples back to the start', () => {
    const growth = rssGrowth(
      samples((t) => (t >= 590 ? 100 : 100 + t / 60)),
      600,
    );
    assert.ok(growth && growth.slopeMiBPerMin > 0.5, `slope ${growth?.slopeMiBPerMin}`);
  });

  test('too short a run has no figure rather than a made-up one', () => {
    assert.equal(rssGrowth(samples(() => 100).slice(0, 5), 600), undefined);
  });

  test('the table: one line per sample, time as m:ss, PostgreSQL up or down', () => {
    const lines = soakTable(samples(() => 113.46)).split('\n');
    assert.equal(lines.length, 62);
    assert.match(
      lines[2],
      /^\| 0:10 \| up \| 113\.5 \| 20\.0 \| 12 \| 1\.7 \| 163\.0 \| 3,160 \| 12 \| 8 \| 30 \| 1630 \| 0 \| 0 \| 0 \| 0 \|$/,
    );
    assert.match(lines[31], /^\| 5:00 \| down \|.* \| 59 \| 0 \| 0 \|$/);
  });

  test('the chart: a line per series with a point per sample, and the outage shaded in every panel only when there was one', () => {
    const data = samples(() => 113);
    const svg = soakChart(data, { durationS: 600, outage: { fromS: 300, toS: 305 }, caption: 'c' });
    const lines = [...svg.matchAll(/<polyline [^>]*points="([^"]+)"/g)].map(
      (m) => m[1].split(' ').length,
    );
    assert.deepEqual(lines, [60, 60, 60, 60, 60, 60, 60]);
    assert.equal((svg.match(/fill="#fde2e2"/g) ?? []).length, 4);
    assert.equal(
      (soakChart(data, { durationS: 600, caption: 'c' }).match(/fill="#fde2e2"/g) ?? []).length,
      0,
    );
  });
});
