import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { parseNamedTokens } from '@sluice/env/named-tokens';
import { TokenSet } from '../../src/auth/token-set.js';
import { ClientDirectory } from '../../src/http/client-directory.js';
import { ESTIMATED_USER_BYTES, limitRate } from '../../src/http/rate-limit.js';
import { SharedRates, fairShare } from '../../src/http/shared-rate.js';
import { RateLimitedError } from '../../src/errors.js';
import { decodeLeases, releaseLeases, renewLeases } from '../../src/db/rate-leases.js';

// Short timings: a renewal every 40 ms (20 ms after a change), a lease living 100 ms, a renewal
// late after 30 ms.
const TIMINGS = { renewMs: 40, renewSoonMs: 20, retryMs: 20, ttlMs: 100, waitMs: 30 };
const STATE = /^"users";r=(\d+);t=(\d+)$/;

/**
 * The two tables as the statements of db/rate-leases.js use them, on this process's clock: each
 * store renews as one process.
 */
function fakeDatabase() {
  /** @type {Map<string, { client: string, process: string, demand: number, expiresAt: number }>} */
  const leases = new Map();
  /** @type {Map<string, number>} */
  const processes = new Map();
  let down = /** @type {'up' | 'failing' | 'silent'} */ ('up');
  let statements = 0;
  /** Processes killed: their statements never reach the database. */
  const dead = new Set();
  /** @param {string} process */
  const storeFor = (process) => ({
    /** @param {{ process: string, leases: { client: string, demand: number }[], released: string[], ttlMs: number }} r */
    async renew(r) {
      statements++;
      if (down === 'failing') throw new Error('connect ECONNREFUSED');
      if (down === 'silent' || dead.has(r.process)) return new Promise(() => {});
      const now = performance.now();
      processes.set(r.process, now + r.ttlMs);
      for (const { client, demand } of r.leases)
        leases.set(`${client}\u0000${r.process}`, {
          client,
          process: r.process,
          demand,
          expiresAt: now + r.ttlMs,
        });
      for (const client of r.released) leases.delete(`${client}\u0000${r.process}`);
      /** @type {Map<string, number[]>} */
      const others = new Map();
      for (const l of leases.values()) {
        if (l.process === r.process || l.expiresAt <= now) continue;
        if (!r.leases.some((w) => w.client === l.client)) continue;
        others.set(l.client, [...(others.get(l.client) ?? []), l.demand]);
      }
      const alive = [...processes].filter(([p, at]) => p !== r.process && at > now).length;
      return { processes: alive + 1, others };
    },
    /** @param {{ process: string, clients: string[] }} r */
    async release(r) {
      statements++;
      if (down !== 'up') throw new Error('connect ECONNREFUSED');
      for (const client of r.clients) leases.delete(`${client}\u0000${r.process}`);
      processes.delete(r.process);
    },
    closed: () => false,
    process,
  });
  return {
    leases,
    storeFor,
    get statements() {
      return statements;
    },
    /** @param {'up' | 'failing' | 'silent'} state */
    set(state) {
      down = state;
    },
    /** @param {string} process */
    kill(process) {
      dead.add(process);
    },
  };
}

/** A logger that keeps its lines. */
function keptLog() {
  /** @type {{ level: string, msg: string }[]} */
  const lines = [];
  const at = (/** @type {string} */ level) => (/** @type {any} */ a, /** @type {any} */ b) =>
    lines.push({ level, msg: typeof a === 'string' ? a : b });
  return {
    lines,
    logger: /** @type {any} */ ({ debug: at('debug'), info: at('info'), warn: at('warn') }),
  };
}

function keptMetrics() {
  const seen = { ok: 0, failed: 0, fallback: /** @type {boolean[]} */ ([]), processes: 0 };
  return {
    seen,
    metrics: {
      statement: (/** @type {boolean} */ ok) => (ok ? seen.ok++ : seen.failed++),
      fallback: (/** @type {boolean} */ on) => seen.fallback.push(on),
      processes: (/** @type {number} */ n) => (seen.processes = n),
    },
  };
}

/** A process of the deployment: its shared rates and its rate-limit step. @param {ReturnType<typeof fakeDatabase>} db @param {string} name */
function processOf(db, name, tokens = '{"bulk": {"token": "t", "rate": 1000, "burst": 1000}}') {
  const log = keptLog();
  const seen = keptMetrics();
  const rates = new SharedRates({
    store: db.storeFor(name),
    logger: log.logger,
    metrics: seen.metrics,
    name,
    timings: TIMINGS,
  });
  const clients = new ClientDirectory({
    tokens: { current: new TokenSet(parseNamedTokens(tokens)) },
    buckets: rates,
  });
  const step = limitRate({ refused: () => {} });
  /** Runs the step for a request of `users` users of `client`: its error (a 429) or undefined. */
  async function request(users = 100, client = 'bulk') {
    const req = /** @type {any} */ ({
      headers: { 'content-length': String(users * ESTIMATED_USER_BYTES) },
      ingestClient: clients.named(client),
    });
    const res = /** @type {any} */ ({ locals: {}, setHeader() {}, once() {} });
    /** @type {unknown} */ let outcome = 'not called';
    await step(req, res, (/** @type {unknown} */ err) => (outcome = err));
    return outcome;
  }
  return { rates, clients, request, log, seen };
}

describe("shared rates: a client's rate leased by share from the database (unit)", () => {
  test('a process alone: its first request waits for the lease, then the whole burst and rate; no statement a request', async () => {
    const db = fakeDatabase();
    const p = processOf(db, 'a');
    assert.equal(db.statements, 0, 'no statement before a rated client is seen');
    assert.equal(await p.request(600), undefined);
    assert.equal(db.statements, 1);
    assert.equal(await p.request(400), undefined);
    assert.ok((await p.request(400)) instanceof RateLimitedError, 'the burst spent');
    assert.equal(db.statements, 1, 'requests cost no statement');
    const bucket = /** @type {import('../../src/http/shared-rate.js').SharedBucket} */ (
      p.clients.named('bulk').bucket
    );
    assert.equal(bucket.share, 1);
    assert.equal(bucket.policy, '"users";q=1000;w=1');
    await p.rates.close();
  });

  test('two processes both asked for more than the rate split it by halves, however much each was asked; one asked for little keeps twice that', async () => {
    const db = fakeDatabase();
    const [a, b] = [processOf(db, 'a'), processOf(db, 'b')];
    const bucketOf = (/** @type {typeof a} */ p) =>
      /** @type {import('../../src/http/shared-rate.js').SharedBucket} */ (
        p.clients.named('bulk').bucket
      );
    const run = async (/** @type {number} */ ms, /** @type {number} */ bUsers) => {
      const until = performance.now() + ms;
      while (performance.now() < until) {
        await a.request(90);
        await b.request(bUsers);
        await sleep(5);
      }
    };
    // a asks about 18,000 users a second, b 6,000: both far over the rate of 1,000.
    await run(300, 30);
    let [sa, sb] = [bucketOf(a).share, bucketOf(b).share];
    assert.ok(Math.abs(sa - 0.5) < 0.02 && Math.abs(sb - 0.5) < 0.02, `shares ${sa} ${sb}`);
    // b asks for little: it needs twice that (its headroom), a the rest.
    await run(400, 1);
    [sa, sb] = [bucketOf(a).share, bucketOf(b).share];
    assert.ok(sb < 0.5 && sa > 0.5, `shares ${sa} ${sb}`);
    assert.ok(sa + sb < 1.1, `never much more than the whole rate: ${sa + sb}`);
    assert.match(a.clients.named('bulk').bucket?.state(performance.now()) ?? '', STATE);
    await Promise.all([a.rates.close(), b.rates.close()]);
  });

  test('any demands: once each process renewed twice, the shares add up to the whole rate', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 1, maxLength: 5 }),
        async (asks) => {
          const db = fakeDatabase();
          const deployment = asks.map((_, i) => processOf(db, `p${i}`));
          const until = performance.now() + 150;
          while (performance.now() < until) {
            for (const [i, p] of deployment.entries()) await p.request(asks[i]);
            await sleep(3);
          }
          const shares = deployment.map(
            (p) =>
              /** @type {import('../../src/http/shared-rate.js').SharedBucket} */ (
                p.clients.named('bulk').bucket
              ).share,
          );
          await Promise.all(deployment.map((p) => p.rates.close()));
          const sum = shares.reduce((x, y) => x + y, 0);
          return sum > 0.9 && sum < 1 + 0.01 * shares.length + 0.1;
        },
      ),
      { numRuns: 15 },
    );
  });

  test('a process that dies stops renewing: its lease expires and the other takes the whole rate', async () => {
    const db = fakeDatabase();
    const [a, b] = [processOf(db, 'a'), processOf(db, 'b')];
    for (let i = 0; i < 20; i++) {
      await a.request(10);
      await b.request(10);
      await sleep(5);
    }
    const bucket = /** @type {import('../../src/http/shared-rate.js').SharedBucket} */ (
      b.clients.named('bulk').bucket
    );
    assert.ok(bucket.share < 0.8, `b's share ${bucket.share} while a serves too`);
    // a dies: nothing of it reaches the database any more, not even a release.
    db.kill('a');
    for (let i = 0; i < 60 && bucket.share < 1; i++) {
      await b.request(10);
      await sleep(5);
    }
    assert.equal(bucket.share, 1, 'the dead lease expired: b holds the whole rate');
    await b.rates.close();
  });

  test('the database fails: requests are answered at once on the fallback share (the rate over the processes known), said once; it comes back: shared again', async () => {
    const db = fakeDatabase();
    const [a, b] = [processOf(db, 'a'), processOf(db, 'b')];
    await a.request(10);
    await b.request(10);
    await sleep(TIMINGS.renewMs * 2);
    db.set('failing');
    for (let i = 0; i < 10; i++) {
      const started = performance.now();
      await a.request(1);
      assert.ok(performance.now() - started < TIMINGS.waitMs + 20, 'never held up');
      await sleep(10);
    }
    assert.equal(a.rates.fallback, true);
    const bucket = /** @type {import('../../src/http/shared-rate.js').SharedBucket} */ (
      a.clients.named('bulk').bucket
    );
    assert.equal(bucket.share, 1 / 2, 'the rate over the two processes known');
    assert.deepEqual(
      a.log.lines.filter((l) => l.level === 'warn').map((l) => l.msg),
      [
        'the shared rates cannot be reached: each process takes its rates over the processes it knows',
      ],
      'said once',
    );
    assert.deepEqual(a.seen.seen.fallback, [true]);
    assert.ok(a.seen.seen.failed >= 2, 'tried again');
    db.set('up');
    for (let i = 0; i < 20 && a.rates.fallback; i++) {
      await a.request(1);
      await sleep(10);
    }
    assert.equal(a.rates.fallback, false);
    assert.deepEqual(a.seen.seen.fallback, [true, false]);
    assert.ok(a.log.lines.some((l) => l.msg === 'the shared rates are reached again'));
    await Promise.all([a.rates.close(), b.rates.close()]);
  });

  test('a database that does not answer: the first request waits at most the lease wait, then goes on the fallback share', async () => {
    const db = fakeDatabase();
    db.set('silent');
    const p = processOf(
      db,
      'a',
      '{"bulk": {"token": "t", "rate": 1000}, "also": {"token": "u", "rate": 1000}}',
    );
    const started = performance.now();
    assert.equal(await p.request(10), undefined);
    const waited = performance.now() - started;
    assert.ok(waited >= TIMINGS.waitMs - 5 && waited < TIMINGS.waitMs + 50, `waited ${waited} ms`);
    assert.equal(p.rates.fallback, false, 'late is not failed: the shares stand');
    const again = performance.now();
    await p.request(10);
    assert.ok(performance.now() - again < 10, 'then at once');
    const other = performance.now();
    assert.equal(await p.request(10, 'also'), undefined);
    assert.ok(performance.now() - other < 10, 'a new client too, while the renewal is late');
  });

  test('a lease asked for nothing in two periods is given back, and then no timer runs', async () => {
    const db = fakeDatabase();
    const p = processOf(db, 'a');
    await p.request(10);
    assert.equal(p.rates.leases, 1);
    await sleep(TIMINGS.renewMs * 4);
    assert.equal(p.rates.leases, 0);
    assert.equal(db.leases.size, 0, 'given back');
    const after = db.statements;
    await sleep(TIMINGS.renewMs * 3);
    assert.equal(db.statements, after, 'nothing leased: no statement');
    assert.equal(await p.request(10), undefined, 'asked again: leased again');
    assert.equal(p.rates.leases, 1);
    await p.rates.close();
  });

  test('a client in debt keeps its debt when its lease is given back and taken again', async () => {
    const db = fakeDatabase();
    const p = processOf(db, 'a', '{"slow": {"token": "t", "rate": 1, "burst": 10}}');
    assert.equal(await p.request(500, 'slow'), undefined, 'over the burst, into debt');
    const bucket = /** @type {import('../../src/http/shared-rate.js').SharedBucket} */ (
      p.clients.named('slow').bucket
    );
    await sleep(TIMINGS.renewMs * 4);
    assert.equal(p.rates.leases, 0, 'given back');
    assert.ok((await p.request(1, 'slow')) instanceof RateLimitedError, 'still owed');
    assert.ok(bucket.level(performance.now()) < -400);
    await p.rates.close();
  });

  test('a client without a rate makes no statement and no timer', async () => {
    const db = fakeDatabase();
    const p = processOf(db, 'a', '{"free": "t"}');
    assert.equal(await p.request(10, 'free'), undefined);
    await sleep(TIMINGS.renewMs * 2);
    assert.equal(db.statements, 0);
    assert.equal(p.rates.leases, 0);
  });

  test('its limits read again with the tokens: the same bucket, the new rate', async () => {
    const db = fakeDatabase();
    const p = processOf(db, 'a');
    await p.request(10);
    const before = p.clients.named('bulk').bucket;
    const holder = /** @type {any} */ (p.clients.tokens);
    holder.current = new TokenSet(
      parseNamedTokens('{"bulk": {"token": "t", "rate": 50, "burst": 100}}'),
    );
    const after = p.clients.named('bulk').bucket;
    assert.equal(after, before, 'one bucket a client, its lease kept');
    assert.equal(after?.policy, '"users";q=100;w=2');
    await p.rates.close();
  });

  test('close gives the leases back at once', async () => {
    const db = fakeDatabase();
    const p = processOf(db, 'a');
    await p.request(10);
    assert.equal(db.leases.size, 1);
    await p.rates.close();
    assert.equal(db.leases.size, 0);
  });
});

describe('fairShare: max-min fair shares of a rate (unit)', () => {
  const demands = fc.array(fc.double({ min: 0, max: 1e6, noNaN: true }), {
    minLength: 1,
    maxLength: 12,
  });
  const shares = (/** @type {number} */ rate, /** @type {number[]} */ d) =>
    d.map((mine, i) => fairShare(rate, mine, [...d.slice(0, i), ...d.slice(i + 1)]));

  test('every process computing from the same demands: the shares add up to the whole rate, none above it', () => {
    fc.assert(
      fc.property(fc.double({ min: 0.001, max: 1e9, noNaN: true }), demands, (rate, d) => {
        const all = shares(rate, d);
        const sum = all.reduce((a, b) => a + b, 0);
        return Math.abs(sum - 1) < 1e-9 && all.every((s) => s >= 0 && s <= 1 + 1e-12);
      }),
    );
  });

  test('processes all asked for more than an even split each get exactly one, however their demands differ', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 100_000 }),
        fc.array(fc.double({ min: 1, max: 1000, noNaN: true }), { minLength: 1, maxLength: 12 }),
        (rate, factors) => {
          const d = factors.map((f) => (f * rate) / factors.length);
          return shares(rate, d).every((s) => Math.abs(s - 1 / d.length) < 1e-9);
        },
      ),
    );
  });

  test('one asked for less than an even split keeps twice what it asked; what nobody needs is split evenly', () => {
    assert.equal(fairShare(1000, 100, [5000, 5000]), 0.2);
    assert.equal(fairShare(1000, 5000, [100, 5000]), 0.4);
    assert.equal(fairShare(1000, 100, [100]), 0.5);
    assert.equal(fairShare(1000, 100, []), 1);
  });
});

describe('rate-leases statements (unit)', () => {
  test("a renewal quotes every client as a literal (a JWT subject is the client's own words) and its demand as a number", () => {
    const { text } = renewLeases({
      process: "host:1:ab'c",
      leases: [
        { client: "jwt:o'brien\\", demand: 12.5 },
        { client: 'token:x', demand: Number.NaN },
      ],
      released: ["jwt:gone'"],
      ttlMs: 6500,
    });
    assert.ok(text.includes("'host:1:ab''c'"), 'the process quoted');
    assert.ok(text.includes("jwt:o''brien"), 'the subject quoted');
    assert.ok(text.includes('"demand":0'), 'a demand that is not a number is none');
    assert.ok(text.includes("'jwt:gone'''"), 'a released client quoted');
    assert.ok(!text.includes('$1'), 'no parameter: one simple query after its SET LOCALs');
    assert.ok(releaseLeases({ process: 'p', clients: [] }).text.includes('IN (NULL)'));
  });

  test('its answer decoded: the processes (this one too) and what the others hold of each client', () => {
    const answer = decodeLeases([
      /** @type {any} */ ({ rows: [] }),
      /** @type {any} */ ({
        rows: [{ other_processes: 2, others: [['token:bulk', [1500.5, 20]]] }],
      }),
    ]);
    assert.equal(answer.processes, 3);
    assert.deepEqual(answer.others.get('token:bulk'), [1500.5, 20]);
  });
});
