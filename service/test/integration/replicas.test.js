import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { createTestDatabase } from '../../../test/support/database.js';
import { startPgBouncer } from '../../../test/support/pgbouncer.js';
import { startServerProcess } from '../../../test/support/server-process.js';
import { makeUsers } from '../../../test/support/users.js';

// Many replicas of the service, each a cluster of workers, behind one transaction-pooling PgBouncer
// and one PostgreSQL: how teams run sluice once one process is not enough. Batches whose emails
// overlap across replicas, shuffled, in ignore and merge mode at once.

const REPLICAS = 3;
const WORKERS = 2;
const POOLER_POOL = 8;
const BATCHES = 90;
const BATCH = 1000;
const POOL_OF_USERS = 6000;
// A refused batch is sent again, as the feeder would, after its Retry-After; a batch still refused
// after this many tries fails the test (nothing may be lost).
const TRIES = 20;

/**
 * @param {string} baseUrl @param {unknown[]} users @param {'ignore' | 'merge'} mode
 * @returns {Promise<{ status: number, retryAfter: string | null, body: any }>}
 */
async function post(baseUrl, users, mode) {
  const res = await fetch(`${baseUrl}/users`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(mode === 'merge' ? { prefer: 'resolution=merge-duplicates' } : {}),
    },
    body: JSON.stringify(users),
  });
  const text = await res.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = text;
  }
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body };
}

describe(`${REPLICAS} replicas × ${WORKERS} workers behind one PgBouncer (transaction pooling, pool of ${POOLER_POOL})`, () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {import('../../../test/support/pgbouncer.js').PgBouncer} */ let bouncer;
  /** @type {Awaited<ReturnType<typeof startServerProcess>>[]} */ let replicas = [];

  before(async () => {
    db = await createTestDatabase();
    bouncer = await startPgBouncer({ upstreamUrl: db.url, poolSize: POOLER_POOL });
    replicas = await Promise.all(
      Array.from({ length: REPLICAS }, async () => {
        const server = await startServerProcess({
          DATABASE_URL: bouncer.url,
          WORKERS: String(WORKERS),
          DB_POOL_MAX: '10',
          DB_CONNECT_TIMEOUT_MS: '20000',
        });
        await server.waitForLog(
          () => server.logs.filter((l) => l.msg === 'listening').length >= WORKERS,
        );
        return server;
      }),
    );
  });
  after(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await bouncer?.stop();
    await db?.drop();
  });

  test('overlapping batches in ignore and merge mode: no 500, nothing lost, counts add up, backends bounded by the pooler', async () => {
    const users = makeUsers(POOL_OF_USERS);
    // Each batch takes an overlapping window of the users, shuffled, so that lock orders would
    // cross between replicas if the service did not sort; every other batch merges changed names.
    const batches = Array.from({ length: BATCHES }, (_, b) => {
      const start = (b * 300) % (POOL_OF_USERS - BATCH);
      const mode = /** @type {'ignore' | 'merge'} */ (b % 2 ? 'merge' : 'ignore');
      const window = users
        .slice(start, start + BATCH)
        .map((u) => (mode === 'merge' ? { ...u, name: `${u.name} (batch ${b})` } : u));
      return { mode, users: window.sort(() => Math.random() - 0.5) };
    });

    // PostgreSQL's connections to this database, sampled while the load runs.
    const watcher = new pg.Client(db.url);
    await watcher.connect();
    const database = new URL(db.url).pathname.slice(1);
    let maxBackends = 0;
    let watching = true;
    const sampling = (async () => {
      while (watching) {
        const { rows } = await watcher.query(
          'SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
          [database],
        );
        maxBackends = Math.max(maxBackends, rows[0].n);
        await new Promise((r) => setTimeout(r, 25));
      }
    })();

    /** @type {{ status: number, retryAfter: string | null, body: any }[]} */
    const refusals = [];
    const started = performance.now();
    const answers = await Promise.all(
      batches.map(async (batch, b) => {
        const replica = replicas[b % REPLICAS];
        for (let attempt = 1; ; attempt++) {
          const answer = await post(replica.baseUrl, batch.users, batch.mode);
          if (answer.status !== 503 || attempt === TRIES) return answer;
          refusals.push(answer);
          await new Promise((r) => setTimeout(r, 1000 * Number(answer.retryAfter ?? 1)));
        }
      }),
    );
    const seconds = (performance.now() - started) / 1000;
    watching = false;
    await sampling;
    await watcher.end();

    for (const [b, a] of answers.entries())
      assert.ok(
        a.status === 200 || a.status === 201,
        `batch ${b} (${batches[b].mode}): ${a.status} ${JSON.stringify(a.body)}`,
      );
    for (const r of refusals)
      assert.ok(r.retryAfter, `a 503 without Retry-After: ${JSON.stringify(r.body)}`);

    // Nothing lost, counts exact: every email sent is stored once, and the inserts the answers
    // report across every replica are exactly the rows in the table.
    const inserted = answers.reduce((sum, a) => sum + a.body.inserted, 0);
    const distinct = new Set(batches.flatMap((b) => b.users.map((u) => u.email))).size;
    assert.equal(await db.countUsers(), distinct);
    assert.equal(inserted, distinct);
    for (const [b, a] of answers.entries()) {
      assert.equal(a.body.received, BATCH);
      assert.equal(a.body.inserted + a.body.duplicates, BATCH, `batch ${b}`);
    }
    // A merged user holds one of the versions sent for it.
    const stored = await db.usersByEmail(users.map((u) => u.email));
    const sentNames = new Map();
    for (const batch of batches)
      for (const u of batch.users)
        sentNames.set(u.email, [...(sentNames.get(u.email) ?? []), u.name]);
    for (const [email, names] of sentNames)
      assert.ok(names.includes(stored.get(email)?.name), `${email} holds a name never sent`);

    // The replicas' pools (REPLICAS × WORKERS × 10 connections) never reach PostgreSQL: the pooler's
    // pool does (plus the readiness and watchdog probes, which go through the pooler too).
    assert.ok(
      maxBackends <= POOLER_POOL + 2,
      `PostgreSQL had ${maxBackends} connections to the database; the pooler's pool is ${POOLER_POOL}`,
    );
    console.log(
      `# ${BATCHES} batches of ${BATCH} in ${seconds.toFixed(1)} s through ${REPLICAS} replicas; ${refusals.length} answered 503 and were sent again; at most ${maxBackends} backends`,
    );

    const logs = replicas.flatMap((r) => r.logs);
    assert.equal(
      logs.filter((l) => l.level >= 50).length,
      0,
      `error lines: ${JSON.stringify(logs.filter((l) => l.level >= 50).slice(0, 3))}`,
    );
    const text = JSON.stringify(logs);
    assert.ok(!text.includes('@example.com'), 'an email in the log');
    assert.ok(!text.includes(`:${new URL(db.url).password}@`), 'the database password in the log');
  });
});
