import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { createDatabase } from '../../src/db.js';
import { DatabaseUnavailableError } from '../../src/errors.js';
import { createGroupCommit } from '../../src/users/group-commit.js';
import { createUserWriter } from '../../src/users/user-repository.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { makeUsers } from '../../../test/support/users.js';

const silent = pino({ level: 'silent' });
/** @typedef {import('../../src/users/user-schema.js').UserRow} UserRow */
/** @param {string} email @param {string} [name] @returns {UserRow} */
const row = (email, name = 'N') => [email, name, null, null];
const tag = () => `gc-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

describe('group commit against PostgreSQL', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let testDb;
  /** @type {import('../../src/db.js').Database} */ let db;
  before(async () => {
    testDb = await createTestDatabase();
    db = createDatabase({ databaseUrl: testDb.url, dbPoolMax: 4, dbConnectTimeoutMs: 2000, dbStatementTimeoutMs: 10_000 }, silent);
  });
  after(async () => {
    await db?.close();
    await testDb?.drop();
  });

  /** One write slot, so everything submitted while the first group is written forms the second. */
  function oneSlot(observed = /** @type {any[]} */ ([])) {
    const writer = createUserWriter(db, { chunkRows: 1000, strategy: 'format' });
    const gc = createGroupCommit({ writer, maxRows: 1000, maxInFlight: 1, observe: (g) => observed.push(g) });
    return { gc, observed };
  }

  test('requests that arrive while a group is written go out together, each with its own count', async () => {
    const { gc, observed } = oneSlot();
    const t = tag();
    const first = gc.insertUsers([row(`${t}-0@x.co`)]);
    const rest = Array.from({ length: 20 }, (_, i) => gc.insertUsers([row(`${t}-${i + 1}a@x.co`), row(`${t}-${i + 1}b@x.co`)]));
    assert.deepEqual(await Promise.all([first, ...rest]), [1, ...Array(20).fill(2)]);
    assert.deepEqual(observed.map((g) => g.requests), [1, 20]);
    assert.deepEqual(observed.map((g) => g.rows), [1, 40]);
    const stored = await testDb.usersByEmail([`${t}-0@x.co`, `${t}-20b@x.co`]);
    assert.equal(stored.size, 2);
  });

  test('an email sent by two requests of one group is credited to the first; a stored one to none', async () => {
    const { gc, observed } = oneSlot();
    const t = tag();
    await testDb.pool.query("INSERT INTO users (email, name) VALUES ($1, 'old')", [`${t}-stored@x.co`]);
    const opener = gc.insertUsers([row(`${t}-opener@x.co`)]);
    const a = gc.insertUsers([row(`${t}-both@x.co`, 'A'), row(`${t}-stored@x.co`)]);
    const b = gc.insertUsers([row(`${t}-both@x.co`, 'B'), row(`${t}-onlyb@x.co`)]);
    assert.deepEqual(await Promise.all([opener, a, b]), [1, 1, 1]);
    assert.equal(observed[1].requests, 2, 'a and b shared a statement');
    const stored = await testDb.usersByEmail([`${t}-both@x.co`, `${t}-stored@x.co`]);
    assert.equal(stored.get(`${t}-both@x.co`)?.name, 'A');
    assert.equal(stored.get(`${t}-stored@x.co`)?.name, 'old', 'a stored user is never overwritten');
  });

  test('a request the shared statement cannot take fails alone; the others of its group are written', async () => {
    const { gc } = oneSlot();
    const t = tag();
    const opener = gc.insertUsers([row(`${t}-opener@x.co`)]);
    const good = gc.insertUsers([row(`${t}-good@x.co`)]);
    // Past validation only here: the table's own CHECK refuses an empty name.
    const bad = gc.insertUsers([row(`${t}-bad@x.co`, '')]);
    const alsoGood = gc.insertUsers([row(`${t}-good2@x.co`)]);
    const [r0, r1, r2, r3] = await Promise.allSettled([opener, good, bad, alsoGood]);
    assert.deepEqual([r0, r1, r3].map((r) => r.status === 'fulfilled' && r.value), [1, 1, 1]);
    assert.equal(r2.status, 'rejected');
    assert.equal(/** @type {any} */ (r2).reason.code, '23514', 'check_violation, from its own statement');
    const stored = await testDb.usersByEmail([`${t}-good@x.co`, `${t}-good2@x.co`, `${t}-bad@x.co`]);
    assert.deepEqual([...stored.keys()].sort(), [`${t}-good2@x.co`, `${t}-good@x.co`]);
  });

  test('when the database is unreachable every request of the group gets DatabaseUnavailableError', async () => {
    const down = createDatabase({ databaseUrl: 'postgres://postgres:postgres@127.0.0.1:1/none', dbPoolMax: 2, dbConnectTimeoutMs: 500, dbStatementTimeoutMs: 1000 }, silent);
    try {
      const writer = createUserWriter(down, { chunkRows: 1000, strategy: 'format' });
      const gc = createGroupCommit({ writer, maxRows: 1000 });
      const results = await Promise.allSettled([1, 2, 3].map((i) => gc.insertUsers([row(`down-${i}@x.co`)])));
      for (const r of results) assert.ok(r.status === 'rejected' && r.reason instanceof DatabaseUnavailableError);
    } finally {
      await down.close();
    }
  });

  test('a group bigger than maxRows is split; no request is cut in two', async () => {
    const writer = createUserWriter(db, { chunkRows: 1000, strategy: 'format' });
    /** @type {any[]} */ const observed = [];
    const gc = createGroupCommit({ writer, maxRows: 10, maxInFlight: 1, observe: (g) => observed.push(g) });
    const t = tag();
    const counts = await Promise.all(Array.from({ length: 8 }, (_, i) => gc.insertUsers([row(`${t}-${i}a@x.co`), row(`${t}-${i}b@x.co`), row(`${t}-${i}c@x.co`)])));
    assert.deepEqual(counts, Array(8).fill(3));
    assert.ok(observed.every((g) => g.rows <= 10 && g.rows % 3 === 0), JSON.stringify(observed));
  });
});

describe('POST /users under group commit', () => {
  const ctx = useAppAndDatabase({ GROUP_COMMIT: 'on' });

  test('200 concurrent single-user requests: every answer its own, groups formed, rows equal the sum', async () => {
    const users = makeUsers(200);
    const before = await ctx.db.countUsers();
    // Every fourth request resends the previous one's user: a duplicate inside or across groups.
    const bodies = users.map((u, i) => [i % 4 === 3 ? users[i - 1] : u]);
    const answers = await Promise.all(bodies.map((b) => ctx.app.postUsers(b)));
    const inserted = answers.reduce((n, a) => n + a.body.inserted, 0);
    for (const a of answers) assert.ok(a.status === 201 || a.status === 200, a.text);
    assert.equal(inserted, 150);
    assert.equal((await ctx.db.countUsers()) - before, 150);
    const metrics = await (await fetch(`${ctx.app.baseUrl}/metrics`)).text();
    const groups = Number(/sluice_group_commit_requests_count (\d+)/.exec(metrics)?.[1]);
    assert.ok(groups > 0 && groups < 200, `${groups} statements for 200 requests`);
  });
});
