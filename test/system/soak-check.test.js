import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import format from 'pg-format';
import { Ledger, checkTable } from '../../bench/lib/soak-ledger.js';
import { groupUsers } from '../../bench/lib/soak-traffic.js';
import { createTestDatabase } from '../support/database.js';

// The soak's verdict rests on this check: it must pass on an exact table and catch each way a table
// can differ from what the service acknowledged.
describe("the soak's table check", () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  before(async () => {
    db = await createTestDatabase();
  });
  after(async () => {
    await db?.drop();
  });

  /** @param {string} prefix @param {number} size @param {number} [skip] an index left out */
  async function store(prefix, size, skip) {
    const rows = groupUsers(prefix, size)
      .filter((_, i) => i !== skip)
      .map((u) => [u.email, u.name]);
    await db.pool.query(format('INSERT INTO users (email, name) VALUES %L', rows));
  }

  test('passes when exactly the acknowledged groups are stored, and a group in doubt whole or absent', async () => {
    await db.pool.query('TRUNCATE users');
    const ledger = new Ledger();
    await store('b0', 1000);
    ledger.settle('b0', 1000, 'acked');
    await store('s0', 1);
    ledger.settle('s0', 1, 'acked');
    ledger.settle('x0', 1000, 'refused');
    await store('b1', 1000);
    ledger.settle('b1', 1000, 'doubt');
    ledger.settle('b2', 1000, 'doubt');
    const check = await checkTable(db.pool, ledger);
    assert.equal(check.ok, true, JSON.stringify(check));
    assert.equal(check.stored, 2001);
  });

  test('fails on a missing, a partial, a refused, an unknown group and a foreign row', async () => {
    await db.pool.query('TRUNCATE users');
    const ledger = new Ledger();
    ledger.settle('s1', 1, 'acked'); // missing
    await store('b3', 1000, 500);
    ledger.settle('b3', 1000, 'acked'); // one user short
    await store('b4', 1000, 999);
    ledger.settle('b4', 1000, 'doubt'); // a transaction half done
    await store('x1', 1000);
    ledger.settle('x1', 1000, 'refused'); // written though refused
    await store('s9', 1); // never sent
    await db.pool.query(
      "INSERT INTO users (email, name) VALUES ('someone@example.com', 'Someone')",
    );
    const check = await checkTable(db.pool, ledger);
    assert.equal(check.ok, false);
    assert.deepEqual(check.missing, ['s1 (1 users)']);
    assert.deepEqual(check.partial.sort(), [
      'b3 (999 of 1000 rows, acked)',
      'b4 (999 of 1000 rows, doubt)',
    ]);
    assert.deepEqual(check.unexpected.sort(), [
      's9 (1 rows, never settled)',
      'x1 (1000 rows, refused)',
    ]);
    assert.equal(check.foreignRows, 1);
  });
});
