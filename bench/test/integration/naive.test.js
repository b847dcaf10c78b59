import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { startServerProcess } from '../../../test/support/server-process.js';
import { adminUrl } from '../../../test/support/database.js';
import { createNaiveDatabase } from '../../naive/schema.js';

const NAIVE_SERVER = fileURLToPath(new URL('../../naive/server.js', import.meta.url));

describe('the naive baseline endpoint (bench/naive), as the bench runs it', () => {
  const name = `naive_test_${randomBytes(6).toString('hex')}`;
  /** @type {pg.Pool} */ let pool;
  /** @type {Awaited<ReturnType<typeof startServerProcess>>} */ let server;
  before(async () => {
    const url = await createNaiveDatabase(adminUrl(), name);
    pool = new pg.Pool({ connectionString: url, max: 2 });
    server = await startServerProcess({ DATABASE_URL: url }, { script: NAIVE_SERVER });
  });
  after(async () => {
    await server?.stop();
    await pool?.end();
    const c = new pg.Client(adminUrl());
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.end();
  });

  /** @param {unknown} body */
  const post = (body) =>
    fetch(`${server.baseUrl}/users`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });

  test('1000 users in one request: 201 {"inserted": 1000}, and the table holds them', async () => {
    const users = Array.from({ length: 1000 }, (_, i) => ({
      email: `n${i}@naive.test`,
      name: `N ${i}`,
      phone: '+15550100100',
    }));
    const res = await post(users);
    assert.equal(res.status, 201);
    assert.deepEqual(await res.json(), { inserted: 1000 });
    const { rows } = await pool.query(
      "SELECT count(*)::int AS n, count(*) FILTER (WHERE phone = '+15550100100' AND created_at IS NOT NULL)::int AS full FROM users",
    );
    assert.deepEqual(rows[0], { n: 1000, full: 1000 });
  });

  test('the email column is a plain unique text column in the default collation, with no CHECK', async () => {
    const { rows } = await pool.query(`SELECT a.attcollation = 100 AS default_collation,
        (SELECT count(*)::int FROM pg_constraint WHERE conrelid = 'users'::regclass AND contype = 'c') AS checks,
        (SELECT count(*)::int FROM pg_constraint WHERE conrelid = 'users'::regclass AND contype = 'u') AS uniques
      FROM pg_attribute a WHERE a.attrelid = 'users'::regclass AND a.attname = 'email'`);
    assert.deepEqual(rows[0], { default_collation: true, checks: 0, uniques: 1 });
  });

  test('no ON CONFLICT: a replayed email fails the whole request and writes none of it', async () => {
    const before = (await pool.query('SELECT count(*)::int AS n FROM users')).rows[0].n;
    const res = await post([
      { email: 'fresh@naive.test', name: 'Fresh' },
      { email: 'n0@naive.test', name: 'Again' },
    ]);
    assert.equal(res.status, 500);
    assert.equal((await pool.query('SELECT count(*)::int AS n FROM users')).rows[0].n, before);
  });
});
