import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pino from 'pino';
import { createDatabase } from '../../src/db/database.js';
import { DatabaseUnavailableError } from '../../src/errors.js';
import { createGroupCommit } from '../../src/users/group-commit.js';
import { createUserWriter } from '../../src/users/user-writer.js';
import { createWritePolicy } from '../../src/users/write-policy.js';
import { POISON_TRIGGER, createTestDatabase } from '../../../test/support/database.js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { part, userRow } from '../../../test/support/user-rows.js';
import { makeUsers, uniqueTag } from '../../../test/support/users.js';

const silent = pino({ level: 'silent' });
/** @typedef {import('../../src/users/user-schema.js').UserRow} UserRow */
/** @param {string} email @param {string} [name] @returns {UserRow} */
const row = (email, name = 'N') => userRow({ email, name });

describe('group commit against PostgreSQL', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let testDb;
  /** @type {import('../../src/db/database.js').Database} */ let db;
  before(async () => {
    testDb = await createTestDatabase();
    await testDb.pool.query(POISON_TRIGGER);
    db = createDatabase(
      {
        databaseUrl: testDb.url,
        dbPoolMax: 4,
        dbConnectTimeoutMs: 2000,
        dbStatementTimeoutMs: 10_000,
      },
      silent,
    );
  });
  after(async () => {
    await db?.close();
    await testDb?.drop();
  });

  /** One write slot, so everything submitted while the first group is written forms the second. */
  function oneSlot(observed = /** @type {any[]} */ ([])) {
    const writer = createUserWriter(db, { chunkRows: 1000, strategy: 'format' });
    const gc = createGroupCommit({
      write: writer.write,
      policy: createWritePolicy(db),
      maxRows: 1000,
      maxInFlight: 1,
      observe: (g) => observed.push(g),
    });
    return { gc, observed };
  }

  test('requests that arrive while a group is written go out together, each with its own counts', async () => {
    const { gc, observed } = oneSlot();
    const t = uniqueTag();
    const first = gc.writeUsers(part([row(`${t}-0@x.co`)]), 'ignore');
    const rest = Array.from({ length: 20 }, (_, i) =>
      gc.writeUsers(part([row(`${t}-${i + 1}a@x.co`), row(`${t}-${i + 1}b@x.co`)]), 'ignore'),
    );
    assert.deepEqual(await Promise.all([first, ...rest]), [
      { received: 1, inserted: 1, updated: 0 },
      ...Array(20).fill({ received: 2, inserted: 2, updated: 0 }),
    ]);
    assert.deepEqual(
      observed.map((g) => g.requests),
      [1, 20],
    );
    assert.deepEqual(
      observed.map((g) => g.rows),
      [1, 40],
    );
    assert.equal((await testDb.usersByEmail([`${t}-0@x.co`, `${t}-20b@x.co`])).size, 2);
  });

  test('requests sharing an email take effect in the order they arrived: ignore keeps the first, merge the last', async () => {
    const { gc } = oneSlot();
    const t = uniqueTag();
    await testDb.pool.query("INSERT INTO users (email, name) VALUES ($1, 'old')", [
      `${t}-stored@x.co`,
    ]);
    const opener = gc.writeUsers(part([row(`${t}-opener@x.co`)]), 'ignore');
    const a = gc.writeUsers(
      part([row(`${t}-both@x.co`, 'A'), row(`${t}-stored@x.co`, 'new')]),
      'ignore',
    );
    const b = gc.writeUsers(part([row(`${t}-both@x.co`, 'B'), row(`${t}-onlyb@x.co`)]), 'ignore');
    const m1 = gc.writeUsers(part([row(`${t}-merged@x.co`, 'M1')]), 'merge');
    const m2 = gc.writeUsers(
      part([row(`${t}-merged@x.co`, 'M2'), row(`${t}-stored@x.co`, 'merged')]),
      'merge',
    );
    assert.deepEqual(await Promise.all([opener, a, b, m1, m2]), [
      { received: 1, inserted: 1, updated: 0 },
      { received: 2, inserted: 1, updated: 0 },
      { received: 2, inserted: 1, updated: 0 },
      { received: 1, inserted: 1, updated: 0 },
      { received: 2, inserted: 0, updated: 2 },
    ]);
    const stored = await testDb.usersByEmail([
      `${t}-both@x.co`,
      `${t}-stored@x.co`,
      `${t}-merged@x.co`,
    ]);
    assert.equal(stored.get(`${t}-both@x.co`)?.name, 'A');
    assert.equal(stored.get(`${t}-merged@x.co`)?.name, 'M2');
    assert.equal(stored.get(`${t}-stored@x.co`)?.name, 'merged');
  });

  // Every class: a data error, a constraint, and the ones that look like the database's state
  // (connection, resources, cancel, deadlock, internal). None may fail another request.
  for (const sqlstate of ['23514', '22021', '08P01', '53300', '57014', '40P01', 'XX000']) {
    test(`a request PostgreSQL refuses with ${sqlstate} fails alone, not with 503; the others of its group are written`, async () => {
      const { gc, observed } = oneSlot();
      const t = uniqueTag();
      const opener = gc.writeUsers(part([row(`${t}-opener@x.co`)]), 'ignore');
      const all = Array.from({ length: 12 }, (_, i) =>
        gc.writeUsers(
          part([row(`${t}-${i}@x.co`, i === 5 ? `poison-${sqlstate}` : 'Good')]),
          'ignore',
        ),
      );
      const results = await Promise.allSettled([opener, ...all]);
      assert.ok(
        observed.some((g) => g.requests > 1),
        'the poisoned request shared a group',
      );
      results.forEach((r, i) => {
        if (i === 6) {
          assert.equal(r.status, 'rejected');
          assert.equal(/** @type {any} */ (r).reason.code, sqlstate, 'its own failure');
          assert.ok(
            !(/** @type {any} */ (r).reason instanceof DatabaseUnavailableError),
            'never 503 for a request that will fail again',
          );
        } else {
          assert.equal(r.status, 'fulfilled', JSON.stringify(r));
        }
      });
      assert.equal(
        (
          await testDb.pool.query('SELECT count(*)::int AS n FROM users WHERE email LIKE $1', [
            `${t}-%`,
          ])
        ).rows[0].n,
        12,
      );
    });
  }

  test('when the database is unreachable every request of the group gets DatabaseUnavailableError', async () => {
    const down = createDatabase(
      {
        databaseUrl: 'postgres://postgres:postgres@127.0.0.1:1/none',
        dbPoolMax: 2,
        dbConnectTimeoutMs: 500,
        dbStatementTimeoutMs: 1000,
      },
      silent,
    );
    try {
      const writer = createUserWriter(down, { chunkRows: 1000, strategy: 'format' });
      const gc = createGroupCommit({
        write: writer.write,
        policy: createWritePolicy(down),
        maxRows: 1000,
      });
      const results = await Promise.allSettled(
        [1, 2, 3].map((i) => gc.writeUsers(part([row(`down-${i}@x.co`)]), 'ignore')),
      );
      for (const r of results)
        assert.ok(r.status === 'rejected' && r.reason instanceof DatabaseUnavailableError);
    } finally {
      await down.close();
    }
  });
});

describe('POST /users under group commit', () => {
  const ctx = useAppAndDatabase({ GROUP_COMMIT: 'on' });
  before(() => ctx.db.pool.query(POISON_TRIGGER));

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

  // Hostile neighbours: 300 concurrent single-user requests, 10 of them hostile. Before, a hash
  // with a NUL passed validation and PostgreSQL refused it with a connection-class SQLSTATE: 503 for
  // the whole group, 232 of the 290 good requests refused. Now the validator refuses the NUL, and a
  // value only PostgreSQL refuses (the trigger) fails its own request alone.
  for (const [hostile, expected] of /** @type {const} */ ([
    ['a NUL in passwordHash', 400],
    ['a row PostgreSQL refuses with 08P01', 500],
  ])) {
    test(`300 concurrent requests, 10 with ${hostile}: those 10 get ${expected}, the 290 others are stored`, async () => {
      const users = makeUsers(300);
      const bad = new Set([3, 31, 62, 93, 124, 155, 186, 217, 248, 279]);
      const bodies = users.map((u, i) =>
        !bad.has(i)
          ? [u]
          : expected === 400
            ? [{ ...u, passwordHash: `${u.passwordHash}\u0000` }]
            : [{ ...u, name: 'poison-08P01' }],
      );
      const answers = await Promise.all(bodies.map((b) => ctx.app.postUsers(b)));
      answers.forEach((a, i) =>
        assert.equal(a.status, bad.has(i) ? expected : 201, `request ${i}: ${a.text}`),
      );
      const stored = await ctx.db.usersByEmail(users.map((u) => u.email));
      assert.equal(stored.size, 290);
      for (const i of bad) assert.ok(!stored.has(users[i].email));
      if (expected === 500) {
        const ids = answers.filter((a) => a.status === 500).map((a) => a.body.errorId);
        assert.ok(
          ids.every((id) => ctx.app.logs.some((l) => l.errorId === id)),
          'each 500 has its error id in the log',
        );
      }
    });
  }
});
