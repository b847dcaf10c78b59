import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createTestDatabase } from '../../../test/support/database.js';
import { startServerProcess } from '../../../test/support/server-process.js';
import { makeUsers } from '../../../test/support/users.js';
import { waitUntil } from '../../../test/support/wait.js';

const REQUESTS = 8;

describe('SIGTERM while requests are in flight', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  before(async () => {
    db = await createTestDatabase();
  });
  after(() => db.drop());

  test('every request in flight at SIGTERM is answered 2xx and stored, then the process exits 0', async () => {
    // One connection and one statement per request (no group commit), and waits long enough for the
    // writes to be held back below without a timeout answering for them.
    const server = await startServerProcess({
      DATABASE_URL: db.url,
      DB_POOL_MAX: String(REQUESTS),
      GROUP_COMMIT: 'off',
      DB_LOCK_TIMEOUT_MS: '60000',
      DB_CONNECT_TIMEOUT_MS: '60000',
    });
    // The writes are held: another session holds a lock on users that every INSERT waits for.
    const holder = await db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE users IN SHARE MODE');
      const batches = Array.from({ length: REQUESTS }, () => makeUsers(500));
      const answers = batches.map((users) =>
        fetch(`${server.baseUrl}/users`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(users),
        })
          .then(async (r) => ({ status: r.status, body: await r.json() }))
          .catch((err) => ({ status: 0, error: String(err) })),
      );
      // Every request has been read, validated and is waiting on the lock: all of them are in flight.
      const waiting = async () =>
        (
          await holder.query(
            "SELECT count(*)::int AS n FROM pg_locks WHERE relation = 'users'::regclass AND NOT granted",
          )
        ).rows[0].n;
      await waitUntil(
        async () => (await waiting()) === REQUESTS,
        `${REQUESTS} INSERTs waiting on the lock`,
        20_000,
        50,
      );

      server.child.kill('SIGTERM');
      await server.waitForLog((l) => l.msg === 'shutting down: finishing in-flight requests');
      await holder.query('COMMIT');

      const results = await Promise.all(answers);
      assert.deepEqual(
        results.map((r) => r.status),
        Array(REQUESTS).fill(201),
        JSON.stringify(results),
      );
      const { code } = await server.exited;
      assert.equal(code, 0);
      for (const users of batches) {
        assert.equal(
          (await db.usersByEmail(users.map((u) => u.email))).size,
          500,
          'an answered batch is stored whole',
        );
      }
      assert.ok(server.logs.some((l) => l.msg === 'stopped'));
    } finally {
      await holder.query('ROLLBACK').catch(() => {});
      holder.release();
      await server.stop();
    }
  });
});
