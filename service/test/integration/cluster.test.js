import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createTestDatabase } from '../../../test/support/database.js';
import { startServerProcess } from '../../../test/support/server-process.js';
import { makeUsers } from '../../../test/support/users.js';

/** @param {string} baseUrl @param {unknown[]} users */
const post = (baseUrl, users) =>
  fetch(`${baseUrl}/users`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(users),
  });

describe('WORKERS cluster mode', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  before(async () => {
    db = await createTestDatabase();
  });
  after(() => db.drop());

  test('a killed worker is replaced, the service keeps answering, and /metrics covers every worker', async () => {
    const server = await startServerProcess({ DATABASE_URL: db.url, WORKERS: '2' });
    try {
      await server.waitForLog(
        (l) =>
          l.msg === 'listening' && server.logs.filter((x) => x.msg === 'listening').length >= 2,
      );
      const workerPids = server.logs.filter((l) => l.msg === 'listening').map((l) => l.pid);
      assert.equal(new Set(workerPids).size, 2);

      const before = server.logs.length;
      process.kill(workerPids[0], 'SIGKILL');
      const died = await server.waitForLog((l) => l.msg === 'worker died; starting a replacement', {
        from: before,
      });
      assert.equal(died.workerPid, workerPids[0]);
      const replacement = await server.waitForLog((l) => l.msg === 'listening', { from: before });
      assert.ok(!workerPids.includes(replacement.pid), 'a new worker');

      let inserted = 0;
      for (let i = 0; i < 6; i++) {
        const res = await post(server.baseUrl, makeUsers(5));
        assert.equal(res.status, 201);
        inserted += (await res.json()).inserted;
      }
      assert.equal(await db.countUsers(), inserted);

      // Connections spread over the workers; whichever answers, the counter is the cluster's sum.
      const metrics = await (await fetch(`${server.baseUrl}/metrics`)).text();
      assert.match(metrics, new RegExp(`sluice_users_inserted_total ${inserted}\\b`));

      server.child.kill('SIGTERM');
      assert.equal((await server.exited).code, 0);
    } finally {
      await server.stop();
    }
  });
});
