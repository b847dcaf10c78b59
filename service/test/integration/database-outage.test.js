import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startLocalPostgres, tempDataDir } from '@sluice/db/local-postgres';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { makeUsers } from '../../../test/support/users.js';
import { waitUntil } from '../../../test/support/wait.js';

// Generous: this guards against a hang, it does not measure speed.
const NO_HANG_MS = 10_000;

describe('PostgreSQL stopped while the service runs', () => {
  /** @type {Awaited<ReturnType<typeof startLocalPostgres>>} */ let server;
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
  /** @type {string} */ let dataDir;
  before(async () => {
    // A server of this test's own: the shared one must stay up for the other test files.
    dataDir = await tempDataDir();
    server = await startLocalPostgres({ dataDir, persistent: true });
    db = await createTestDatabase({ serverUrl: server.url });
    app = await startTestApp({ databaseUrl: db.url, env: { DB_CONNECT_TIMEOUT_MS: '1000' } });
  });
  after(async () => {
    await app?.close();
    await db?.pool.end().catch(() => {});
    await server?.stop();
    await rm(path.dirname(dataDir), { recursive: true, force: true });
  });

  test('requests get 503 with Retry-After quickly, nothing is written, and service resumes without a restart', async () => {
    assert.equal((await app.postUsers(makeUsers(10))).status, 201);

    await server.stop();
    const refused = makeUsers(1000);
    const res = await app.postUsers(refused, { headers: {} });
    assert.equal(res.status, 503, res.text);
    assert.equal(res.body.error, 'database_unavailable');
    assert.equal(res.headers.get('retry-after'), '2');
    const ready = await fetch(`${app.baseUrl}/readyz`, { signal: AbortSignal.timeout(NO_HANG_MS) });
    assert.equal(ready.status, 503);
    assert.equal(
      (await fetch(`${app.baseUrl}/healthz`)).status,
      200,
      'the process itself stays healthy',
    );
    assert.ok(
      app.logs.some((l) => l.msg === 'database unavailable'),
      'the outage is logged',
    );

    await server.start();
    // Ready again by itself (each failed check also drops a connection to the old server)...
    await waitUntil(
      async () => (await fetch(`${app.baseUrl}/readyz`)).status === 200,
      '/readyz to answer 200 again',
      NO_HANG_MS,
      100,
    );
    // ...and then it writes at the first try.
    const again = await app.postUsers(makeUsers(100));
    assert.equal(again.status, 201, again.text);
    assert.equal(
      await db.countUsers(),
      110,
      'the users refused during the outage were not written',
    );
  });
});
