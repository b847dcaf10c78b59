import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createTestDatabase } from '../../../test/support/database.js';
import { startServerProcess } from '../../../test/support/server-process.js';
import { makeUsers } from '../../../test/support/users.js';

describe('SIGTERM while 1000-user requests are in flight', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  before(async () => {
    db = await createTestDatabase();
  });
  after(() => db.drop());

  test('every request answered 2xx is in the table, and the process exits 0', async () => {
    // debug: successful requests are logged, and the first one says the others are in flight.
    const server = await startServerProcess({ DATABASE_URL: db.url, DB_POOL_MAX: '4', DB_CONNECT_TIMEOUT_MS: '20000', LOG_LEVEL: 'debug' });
    try {
      const batches = Array.from({ length: 12 }, () => makeUsers(1000));
      const answers = batches.map((users) =>
        fetch(`${server.baseUrl}/users`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(users) })
          .then(async (r) => ({ status: r.status, body: await r.json() }))
          .catch((err) => ({ status: 0, error: err })),
      );
      // Let the requests reach the server, then ask it to stop while they are being written.
      await server.waitForLog((l) => l.msg === 'request completed' && l.req?.url === '/users', { timeoutMs: 15_000 }).catch(() => {});
      server.child.kill('SIGTERM');
      const results = await Promise.all(answers);
      const { code } = await server.exited;
      assert.equal(code, 0);

      const ok = results.map((r, i) => ({ ...r, users: batches[i] })).filter((r) => r.status >= 200 && r.status < 300);
      assert.ok(ok.length >= 2, `some requests finished (${results.map((r) => r.status).join(',')})`);
      for (const r of ok) {
        const stored = await db.usersByEmail(r.users.map((u) => u.email));
        assert.equal(stored.size, 1000, 'an answered batch is stored whole');
      }
      // Nothing half-written: every batch is stored whole or not at all.
      for (const users of batches) {
        const n = (await db.usersByEmail(users.map((u) => u.email))).size;
        assert.ok(n === 0 || n === 1000, `a batch stored ${n} of 1000`);
      }
      assert.ok(server.logs.some((l) => l.msg === 'shutting down: finishing in-flight requests'));
      assert.ok(server.logs.some((l) => l.msg === 'stopped'));
    } finally {
      await server.stop();
    }
  });
});
