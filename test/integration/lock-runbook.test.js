import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { createTestDatabase } from '../support/database.js';
import { waitUntil } from '../support/wait.js';

// docs/operations.md's lock runbook, its queries as written: a session that inserted a user and
// left its transaction open is found by the first two whether or not anything waits for it, and by
// the third (pg_blocking_pids) only while a writer waits.

const operations = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
const section = operations.slice(
  operations.indexOf('### A table or rows are locked'),
  operations.indexOf('\n### ', operations.indexOf('### A table or rows are locked') + 5),
);
const [onUsers, openTransactions, blockers] = [...section.matchAll(/```sql\n([\s\S]*?)```/g)].map(
  (m) => m[1],
);

describe("operations.md's lock runbook finds the holder", () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {pg.Client} */ let holder;
  /** @type {pg.Client} */ let operator;
  /** @type {number} */ let holderPid;
  before(async () => {
    db = await createTestDatabase();
    holder = new pg.Client(db.url);
    operator = new pg.Client(db.url);
    await Promise.all([holder.connect(), operator.connect()]);
    holderPid = (await holder.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
    await holder.query('BEGIN');
    await holder.query("INSERT INTO users (email, name) VALUES ('held@example.com', 'Held')");
  });
  after(async () => {
    await holder?.end();
    await operator?.end();
    await db?.drop();
  });

  /** @param {string} sql */
  const pidsOf = async (sql) => (await operator.query(sql)).rows.map((r) => r.pid);

  test('the section has its three queries', () => {
    assert.ok(onUsers && openTransactions && blockers);
  });

  test('with nothing waiting: the locks on users and the open transactions name it; pg_blocking_pids does not', async () => {
    assert.deepEqual(await pidsOf(onUsers), [holderPid]);
    assert.ok((await pidsOf(openTransactions)).includes(holderPid));
    assert.ok(!(await pidsOf(blockers)).includes(holderPid));
  });

  test('with a writer waiting for the same email: pg_blocking_pids names it too', async () => {
    const writer = new pg.Client(db.url);
    await writer.connect();
    try {
      const waiting = writer
        .query(
          "SET lock_timeout = '10s'; INSERT INTO users (email, name) VALUES ('held@example.com', 'Waiting') ON CONFLICT DO NOTHING",
        )
        .catch((err) => err);
      await waitUntil(
        async () => (await pidsOf(blockers)).includes(holderPid),
        'pg_blocking_pids to name the holder',
        10_000,
        50,
      );
      await holder.query('ROLLBACK');
      assert.ok(!((await waiting) instanceof Error));
    } finally {
      await writer.end();
    }
  });
});
