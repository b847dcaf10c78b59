// /readyz is unauthenticated and a load balancer's health check: however often it is asked, it
// costs the database at most one check a second on a connection of the pool, never a new session
// a probe; and it still says 503 when the database goes away, 200 once it is back.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { startForwarder, throughForwarder } from '../../../test/support/forwarder.js';
import { makeUsers } from '../../../test/support/users.js';
import { waitUntil } from '../../../test/support/wait.js';

const PROBES = 1000;
const AT_ONCE = 50;

describe('/readyz under a flood of probes', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startForwarder>>} */ let forwarder;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
  before(async () => {
    db = await createTestDatabase();
    forwarder = await startForwarder(Number(new URL(db.url).port));
    app = await startTestApp({
      databaseUrl: throughForwarder(db.url, forwarder),
      env: { DB_CONNECT_TIMEOUT_MS: '1000' },
    });
  });
  after(async () => {
    await app?.close();
    await forwarder?.close();
    await db?.drop();
  });

  const readyz = () => fetch(`${app.baseUrl}/readyz`, { signal: AbortSignal.timeout(5_000) });

  test(`${PROBES} probes, ${AT_ONCE} at a time: every one 200, at most one check a second, no new session`, async () => {
    assert.equal((await app.postUsers(makeUsers(3))).status, 201);
    assert.equal((await readyz()).status, 200);
    const before = forwarder.counts();
    const started = performance.now();
    /** @type {number[]} */ const statuses = [];
    for (let sent = 0; sent < PROBES; sent += AT_ONCE) {
      const answers = await Promise.all(Array.from({ length: AT_ONCE }, () => readyz()));
      for (const res of answers) {
        statuses.push(res.status);
        await res.arrayBuffer();
      }
    }
    const seconds = (performance.now() - started) / 1000;
    const { sessions, queries } = forwarder.counts();
    assert.equal(statuses.length, PROBES);
    assert.deepEqual(new Set(statuses), new Set([200]));
    assert.equal(sessions - before.sessions, 0, 'every check on a connection the pool held');
    // A check is two round trips (BEGIN and the schema's query, then ROLLBACK), one a second.
    const checks = (queries - before.queries) / 2;
    assert.ok(
      checks <= Math.ceil(seconds) + 1,
      `${checks} checks in ${seconds.toFixed(1)} s for ${PROBES} probes`,
    );
    assert.equal(await db.countUsers(), 3, 'the probes wrote nothing');
  });

  test('the database goes away: 503 within seconds; back: 200 again, and writes go on', async () => {
    forwarder.down();
    const downAt = performance.now();
    await waitUntil(async () => (await readyz()).status === 503, '/readyz 503', 5_000, 100);
    assert.ok(performance.now() - downAt < 5_000);
    forwarder.up();
    await waitUntil(async () => (await readyz()).status === 200, '/readyz 200 again', 5_000, 100);
    assert.equal((await app.postUsers(makeUsers(2))).status, 201);
    const logged = JSON.stringify(app.logs);
    assert.ok(!logged.includes('example.com'), 'no email in the log');
  });
});
