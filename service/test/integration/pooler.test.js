// The service behind a real transaction pooler: PgBouncer (Debian's 1.18) in transaction mode, with
// no startup parameter ignored but extra_float_digits, as managed pools run it. Every path that
// writes goes through it and must answer as it does direct, with every time bound kept: each
// transaction sets its own (service/src/db/transaction-settings.js), since a connection to the pooler
// is another server connection from one transaction to the next. Locks are held by a session of
// their own, straight to PostgreSQL.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { startPgBouncer } from '../../../test/support/pgbouncer.js';
import { within } from '../../../test/support/time-factor.js';
import { SAMPLE_HASH, makeUsers, uniqueTag } from '../../../test/support/users.js';

// The pooler's server connections for the test database: fewer than the service's DB_POOL_MAX (10),
// so transactions of many client connections share them, as behind a real pooler.
const POOL_SIZE = 4;
const LOCK_TIMEOUT_MS = 2_000;
// The statement timeout of the service the statement-timeout test starts (the others keep 10 s:
// a statement timeout shorter than the lock timeout would end a lock wait first).
const STATEMENT_TIMEOUT_MS = 1_500;
// The answers' slack over the limit that ended them.
const SLACK_MS = 1_000;
/**
 * How long a locked-out request may take. A single user tries briefly in its group and alone
 * (250 ms each: app.js) before it waits DB_LOCK_TIMEOUT_MS in the slow lane. lock_timeout bounds
 * each lock wait, not the statement: behind a row lock (FOR UPDATE) a second waiter first queues
 * for the row's tuple lock behind the first waiter, then for the holder's transaction, each up
 * to DB_LOCK_TIMEOUT_MS (as direct: row-locks.test.js).
 * @type {Record<string, number>}
 */
const boundMs = {
  'uncommitted insert': LOCK_TIMEOUT_MS + 500 + within(SLACK_MS),
  'FOR UPDATE': 2 * LOCK_TIMEOUT_MS + 500 + within(SLACK_MS),
};
const OTHERS_P99_MS = 1_000;
const NDJSON = 'application/x-ndjson';
const CSV = 'text/csv';

/** @param {number[]} values @param {number} q */
const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};
/** @param {object[]} users */
const ndjson = (users) => users.map((u) => JSON.stringify(u)).join('\n') + '\n';
/** @param {{ email: string, name: string, phone?: string, passwordHash?: string }[]} users */
const csv = (users) =>
  'email,name,phone,passwordHash\n' +
  users.map((u) => `${u.email},"${u.name}",${u.phone ?? ''},"${u.passwordHash ?? ''}"`).join('\n') +
  '\n';

describe('through PgBouncer in transaction mode', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startPgBouncer>>} */ let pooler;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
  /** @type {Awaited<ReturnType<typeof startTestApp>>[]} */ const apps = [];

  /** The service on the pooler's URL. @param {Record<string, string>} [env] */
  async function serviceThroughPooler(env = {}) {
    const started = await startTestApp({
      databaseUrl: pooler.url,
      env: {
        DB_LOCK_TIMEOUT_MS: String(LOCK_TIMEOUT_MS),
        DB_STATEMENT_TIMEOUT_MS: '10000',
        MAX_STREAM_BYTES: String(64 * 1024 * 1024),
        ...env,
      },
    });
    apps.push(started);
    return started;
  }

  before(async () => {
    db = await createTestDatabase();
    pooler = await startPgBouncer({ upstreamUrl: db.url, poolSize: POOL_SIZE });
    app = await serviceThroughPooler();
  });
  after(async () => {
    for (const a of apps) await a.close();
    await pooler?.stop();
    await db?.drop();
  });

  /** A session straight to PostgreSQL, as another writer or psql would be. */
  async function directSession() {
    const client = new pg.Client(db.url);
    client.on('error', () => {});
    await client.connect();
    return client;
  }

  /** Nothing secret or personal in any log line, nothing logged as an error, no refusal by the pooler. @param {any[]} logs */
  function assertLogClean(logs) {
    const log = JSON.stringify(logs);
    assert.ok(!log.includes('@example.com') && !log.includes('@x.co'), 'no email in the log');
    assert.ok(!log.includes(SAMPLE_HASH.slice(0, 20)), 'no password hash in the log');
    assert.ok(!log.includes(':postgres@'), 'no password in the log');
    assert.ok(!log.includes('unsupported startup parameter'), 'the pooler refused no connection');
    assert.deepEqual(
      logs.filter((l) => l.level >= 50),
      [],
      'nothing logged as an error',
    );
  }

  /** What a transaction left behind on the server: temporary tables, advisory locks. */
  async function leftBehind() {
    const direct = await directSession();
    try {
      const { rows } = await direct.query(`SELECT
        (SELECT count(*)::int FROM pg_class WHERE relpersistence = 't') AS temporary_tables,
        (SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory') AS advisory_locks`);
      return rows[0];
    } finally {
      await direct.end();
    }
  }

  test('the service connects (nothing refused at start-up) and is ready', async () => {
    const ready = await fetch(`${app.baseUrl}/readyz`);
    assert.equal(ready.status, 200, await ready.text());
    const pools = await pooler.showPools();
    const ours = pools.find((p) => p.database === new URL(db.url).pathname.slice(1));
    assert.ok(ours, 'the pooler has a pool for the test database');
    assert.equal(ours.pool_mode, 'transaction');
  });

  test('round trips per request, counted by the pooler: the time limits cost none with the default strategy', async () => {
    const alone = await serviceThroughPooler({ GROUP_COMMIT: 'off' });
    const unnest = await serviceThroughPooler({ GROUP_COMMIT: 'off', INSERT_STRATEGY: 'unnest' });
    const copy = await serviceThroughPooler({ GROUP_COMMIT: 'off', INSERT_STRATEGY: 'copy' });
    /** @param {() => Promise<{ status: number }>} request */
    const roundTrips = async (request) => {
      const before = await pooler.stats();
      const res = await request();
      assert.ok(res.status < 300, `answered ${res.status}`);
      return (await pooler.stats()).queries - before.queries;
    };
    const [stored] = makeUsers(1);
    assert.equal((await alone.postUsers([stored])).status, 201);
    const counted = {
      'one user': await roundTrips(() => alone.postUsers(makeUsers(1))),
      'one user, return=representation': await roundTrips(() =>
        alone.postUsers(makeUsers(1), { headers: { Prefer: 'return=representation' } }),
      ),
      'one user already stored (all-new try, then ON CONFLICT)': await roundTrips(() =>
        alone.postUsers([stored]),
      ),
      '2500 users (3 chunks, BEGIN, COMMIT)': await roundTrips(() =>
        alone.postUsers(makeUsers(2500)),
      ),
      'one user, group commit': await roundTrips(() => app.postUsers(makeUsers(1))),
      'one user, unnest (BEGIN, INSERT with parameters, COMMIT)': await roundTrips(() =>
        unnest.postUsers(makeUsers(1)),
      ),
      'one user, copy (BEGIN, COPY, COMMIT)': await roundTrips(() => copy.postUsers(makeUsers(1))),
      'NDJSON stream (BEGIN, SAVEPOINT, COPY, RELEASE, COMMIT)': await roundTrips(() =>
        alone.postUsers(ndjson(makeUsers(10)), { contentType: NDJSON }),
      ),
      '/readyz (BEGIN with its query, ROLLBACK)': await roundTrips(() =>
        fetch(`${alone.baseUrl}/readyz`),
      ),
    };
    console.error(`[pooler] round trips: ${JSON.stringify(counted)}`);
    assert.deepEqual(counted, {
      'one user': 1,
      'one user, return=representation': 1,
      'one user already stored (all-new try, then ON CONFLICT)': 2,
      '2500 users (3 chunks, BEGIN, COMMIT)': 5,
      'one user, group commit': 1,
      'one user, unnest (BEGIN, INSERT with parameters, COMMIT)': 3,
      'one user, copy (BEGIN, COPY, COMMIT)': 3,
      'NDJSON stream (BEGIN, SAVEPOINT, COPY, RELEASE, COMMIT)': 5,
      '/readyz (BEGIN with its query, ROLLBACK)': 2,
    });
  });

  test('group commit: 200 concurrent single users, each answered 201 as direct, all stored', async () => {
    const users = makeUsers(200);
    const started = performance.now();
    const answers = await Promise.all(users.map((u) => app.postUsers([u])));
    console.error(
      `[pooler] 200 single users at once: ${Math.round(performance.now() - started)} ms`,
    );
    for (const res of answers)
      assert.deepEqual(
        [res.status, res.body],
        [201, { received: 1, inserted: 1, updated: 0, duplicates: 0 }],
      );
    assert.equal((await db.usersByEmail(users.map((u) => u.email))).size, 200);
    // A replay of each: skipped, never duplicated.
    const again = await Promise.all(users.slice(0, 50).map((u) => app.postUsers([u])));
    for (const res of again) assert.deepEqual([res.status, res.body?.duplicates], [200, 1]);
    assertLogClean(app.logs);
  });

  test('16 batches of 1000 users, 4 at a time: all stored; a batch over INSERT_CHUNK_ROWS in one transaction', async () => {
    const tag = uniqueTag();
    const batches = Array.from({ length: 16 }, (_, b) => makeUsers(1000, `${tag}-${b}`));
    for (let i = 0; i < batches.length; i += 4) {
      const answers = await Promise.all(
        batches.slice(i, i + 4).map((batch) => app.postUsers(batch)),
      );
      for (const res of answers)
        assert.deepEqual(
          [res.status, res.body],
          [201, { received: 1000, inserted: 1000, updated: 0, duplicates: 0 }],
        );
    }
    const big = makeUsers(2500, `${tag}-big`);
    const res = await app.postUsers(big);
    assert.deepEqual([res.status, res.body?.inserted], [201, 2500], res.text);
    const emails = [...batches.flat(), ...big].map((u) => u.email);
    assert.equal((await db.usersByEmail(emails)).size, emails.length);
  });

  test('merge mode: a replay with changes updates the stored rows, single and batched', async () => {
    const users = makeUsers(1200);
    assert.equal((await app.postUsers(users)).status, 201);
    const renamed = users.map((u, i) => ({ ...u, name: `Renamed ${i}`, phone: undefined }));
    const merge = { Prefer: 'resolution=merge-duplicates' };
    const batch = await app.postUsers(renamed.slice(0, 1000), { headers: merge });
    assert.deepEqual(
      [batch.status, batch.body],
      [200, { received: 1000, inserted: 0, updated: 1000, stale: 0, duplicates: 1000 }],
    );
    const singles = await Promise.all(
      renamed.slice(1000).map((u) => app.postUsers([u], { headers: merge })),
    );
    for (const res of singles)
      assert.deepEqual([res.status, res.body?.updated], [200, 1], res.text);
    const stored = await db.usersByEmail(users.map((u) => u.email));
    assert.deepEqual(
      stored.get(users[1100].email),
      {
        email: users[1100].email,
        name: 'Renamed 1100',
        phone: users[1100].phone,
        password_hash: SAMPLE_HASH,
      },
      'the phone not sent is kept',
    );
  });

  test('return=representation: the rows as written, alone, in a group and in a batch', async () => {
    const representation = { Prefer: 'return=representation' };
    const users = makeUsers(30);
    const answers = await Promise.all(
      users.map((u) => app.postUsers([u], { headers: representation })),
    );
    for (const [i, res] of answers.entries()) {
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.length, 1);
      assert.equal(res.body[0].email, users[i].email);
      assert.match(res.body[0].createdAt, /^\d{4}-\d\d-\d\dT/);
    }
    const batch = makeUsers(1500);
    const res = await app.postUsers(batch, { headers: representation });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(
      res.body.map((/** @type {{ email: string }} */ u) => u.email),
      batch.map((u) => u.email),
    );
  });

  test('a streamed NDJSON import of 50,000 users (COPY in one transaction), then CSV in merge mode (its staging table)', async () => {
    const users = makeUsers(50_000);
    const started = performance.now();
    const res = await app.postUsers(ndjson(users), { contentType: NDJSON });
    console.error(`[pooler] 50,000 users as NDJSON: ${Math.round(performance.now() - started)} ms`);
    assert.deepEqual(
      [res.status, res.body],
      [201, { received: 50_000, inserted: 50_000, updated: 0, duplicates: 0 }],
      res.text,
    );
    assert.equal((await db.usersByEmail(users.map((u) => u.email))).size, 50_000);

    // Half stored already, half new, renamed: merge mode stages the whole body, then writes it.
    const mixed = [...users.slice(0, 1000), ...makeUsers(1000)].map((u) => ({
      ...u,
      name: 'Merged',
    }));
    const merged = await app.postUsers(csv(mixed), {
      contentType: CSV,
      headers: { Prefer: 'resolution=merge-duplicates' },
    });
    assert.deepEqual(
      [merged.status, merged.body],
      [201, { received: 2000, inserted: 1000, updated: 1000, stale: 0, duplicates: 1000 }],
      merged.text,
    );
    // Ignore mode meeting stored emails: chunks go through the staging table too.
    const replay = await app.postUsers(ndjson([...users.slice(0, 9000), ...makeUsers(10)]), {
      contentType: NDJSON,
    });
    assert.deepEqual(
      [replay.status, replay.body],
      [201, { received: 9010, inserted: 10, updated: 0, duplicates: 9000 }],
      replay.text,
    );
    assert.deepEqual(
      await leftBehind(),
      { temporary_tables: 0, advisory_locks: 0 },
      'no staging table outlived its transaction',
    );
    assertLogClean(app.logs);
  });

  test('every INSERT_STRATEGY, group commit on and off: new, replayed and merged users, nothing left behind', async () => {
    for (const strategy of ['format', 'unnest', 'copy']) {
      for (const groupCommit of ['on', 'off']) {
        const variant = await serviceThroughPooler({
          INSERT_STRATEGY: strategy,
          GROUP_COMMIT: groupCommit,
          INSERT_CHUNK_ROWS: '400',
        });
        const label = `${strategy}, group commit ${groupCommit}`;
        const users = makeUsers(1000);
        const first = await variant.postUsers(users.slice(0, 900));
        assert.deepEqual(
          [first.status, first.body?.inserted],
          [201, 900],
          `${label}: ${first.text}`,
        );
        // Stored and new together: the all-new try fails, the write resolves conflicts (copy: staging).
        const replay = await variant.postUsers(users);
        assert.deepEqual(
          [replay.status, replay.body?.inserted, replay.body?.duplicates],
          [201, 100, 900],
          `${label}: ${replay.text}`,
        );
        const merge = await variant.postUsers(
          users.map((u) => ({ ...u, name: 'Merged' })),
          { headers: { Prefer: 'resolution=merge-duplicates' } },
        );
        assert.deepEqual(
          [merge.status, merge.body?.updated],
          [200, 1000],
          `${label}: ${merge.text}`,
        );
        const singles = await Promise.all(makeUsers(20).map((u) => variant.postUsers([u])));
        assert.deepEqual([...new Set(singles.map((r) => r.status))], [201], label);
        const stored = await db.usersByEmail(users.map((u) => u.email));
        assert.equal([...stored.values()].filter((u) => u.name === 'Merged').length, 1000, label);
        assertLogClean(variant.logs);
      }
    }
    assert.deepEqual(await leftBehind(), { temporary_tables: 0, advisory_locks: 0 });
  });

  test('a row another session holds: 503 lock_timeout within DB_LOCK_TIMEOUT_MS, other requests served meanwhile (p99 < 1 s)', async () => {
    for (const hold of ['uncommitted insert', 'FOR UPDATE']) {
      const tag = uniqueTag();
      const lockedEmail = `locked-${tag}@x.co`;
      if (hold === 'FOR UPDATE')
        assert.equal((await app.postUsers([{ email: lockedEmail, name: 'Before' }])).status, 201);
      const holder = await directSession();
      await holder.query('BEGIN');
      if (hold === 'FOR UPDATE')
        await holder.query('SELECT * FROM users WHERE email = $1 FOR UPDATE', [lockedEmail]);
      else
        await holder.query("INSERT INTO users (email, name) VALUES ($1, 'Holder')", [lockedEmail]);
      const headers = hold === 'FOR UPDATE' ? { Prefer: 'resolution=merge-duplicates' } : {};
      /** @param {unknown} body */
      const timed = async (body) => {
        const started = performance.now();
        const res = await app.postUsers(body, { headers });
        return { ...res, ms: performance.now() - started };
      };
      const locked = timed([{ email: lockedEmail, name: 'Sent', passwordHash: SAMPLE_HASH }]);
      const large = timed([...makeUsers(999, tag), { email: lockedEmail, name: 'Sent' }]);
      // Fresh single users from 8 clients for as long as the lock is held (3 s).
      /** @type {{ status: number, ms: number, email: string }[]} */
      const fresh = [];
      const until = performance.now() + LOCK_TIMEOUT_MS + 1_000;
      await Promise.all(
        Array.from({ length: 8 }, async (_, c) => {
          for (let i = 0; performance.now() < until; i++) {
            const email = `fresh-${tag}-${c}-${i}@x.co`;
            const started = performance.now();
            const res = await app.postUsers([{ email, name: 'Fresh' }], { headers });
            fresh.push({ status: res.status, ms: performance.now() - started, email });
          }
        }),
      );
      const [lockedRes, largeRes] = await Promise.all([locked, large]);
      await holder.query('COMMIT');
      await holder.end();

      for (const [what, res] of /** @type {const} */ ([
        ['the locked request', lockedRes],
        ['the large request holding the email', largeRes],
      ])) {
        assert.equal(res.status, 503, `${hold}, ${what}: ${res.text}`);
        assert.equal(res.body.error, 'lock_timeout', `${hold}, ${what}`);
        assert.equal(res.headers.get('retry-after'), '1');
        assert.ok(
          res.ms < boundMs[hold],
          `${hold}, ${what} answered after ${Math.round(res.ms)} ms (DB_LOCK_TIMEOUT_MS ${LOCK_TIMEOUT_MS})`,
        );
        // The bound is the database's, not a client-side one: it took the lock timeout at least.
        assert.ok(
          res.ms >= LOCK_TIMEOUT_MS - 50,
          `${hold}, ${what}: answered after ${Math.round(res.ms)} ms, before the lock timeout`,
        );
      }
      const p99 = quantile(
        fresh.map((a) => a.ms),
        0.99,
      );
      console.error(
        `[pooler] ${hold}: ${fresh.length} fresh requests meanwhile, p50 ${Math.round(
          quantile(
            fresh.map((a) => a.ms),
            0.5,
          ),
        )} ms, p99 ${Math.round(p99)} ms`,
      );
      assert.ok(fresh.length >= 40, `fresh traffic flowed: ${fresh.length}`);
      assert.deepEqual([...new Set(fresh.map((a) => a.status))], [201]);
      assert.ok(p99 < within(OTHERS_P99_MS), `others are not held back: p99 ${Math.round(p99)} ms`);
      assert.equal((await db.usersByEmail(fresh.map((a) => a.email))).size, fresh.length);
      assert.equal(
        (await db.usersByEmail(makeUsers(999, tag).map((u) => u.email))).size,
        0,
        'the large request refused is not half-written',
      );
    }
    assert.ok(
      app.logs.some((l) => l.msg === 'locked out by another writer' && l.err?.code === '55P03'),
      'the lock timeout is logged by its SQLSTATE',
    );
    assertLogClean(app.logs);
  });

  test('the whole table locked by another session: 2xx or 503 lock_timeout, nobody waits unbounded', async () => {
    const holder = await directSession();
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE users IN SHARE MODE');
    const users = makeUsers(20);
    const started = performance.now();
    const answers = await Promise.all(users.map((u) => app.postUsers([u])));
    const ms = performance.now() - started;
    await holder.query('COMMIT');
    await holder.end();
    assert.ok(ms < 2 * LOCK_TIMEOUT_MS + within(SLACK_MS), `answered within ${Math.round(ms)} ms`);
    assert.ok(
      answers.every((res) => res.status === 503 && res.body.error === 'lock_timeout'),
      JSON.stringify(answers.map((r) => r.status)),
    );
    assert.equal((await db.usersByEmail(users.map((u) => u.email))).size, 0);
  });

  test('a statement past DB_STATEMENT_TIMEOUT_MS: 503 statement_timeout, alone, in a group, in a batch and under unnest', async () => {
    const timing = { DB_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS) };
    const bounded = await serviceThroughPooler(timing);
    const unnest = await serviceThroughPooler({ ...timing, INSERT_STRATEGY: 'unnest' });
    const holder = await directSession();
    await holder.query(`CREATE FUNCTION sleepy() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN IF NEW.name = 'Sleeper' THEN PERFORM pg_sleep(5); END IF; RETURN NEW; END $$;
      CREATE TRIGGER sleepy BEFORE INSERT ON users FOR EACH ROW EXECUTE FUNCTION sleepy()`);
    try {
      const sleeper = () => ({ ...makeUsers(1)[0], name: 'Sleeper' });
      /** @param {typeof bounded} via @param {unknown} body */
      const timed = async (via, body) => {
        const started = performance.now();
        const res = await via.postUsers(body);
        return { ...res, ms: performance.now() - started };
      };
      const cases = {
        alone: await timed(bounded, [sleeper()]),
        'a batch of 1500 (two chunks)': await timed(bounded, [...makeUsers(1499), sleeper()]),
        'unnest, alone': await timed(unnest, [sleeper()]),
      };
      // In a group with others: the group times out, every request of it is told so.
      const group = await Promise.all([
        timed(bounded, [sleeper()]),
        ...makeUsers(5).map((u) => timed(bounded, [u])),
      ]);
      for (const [what, res] of Object.entries(cases)) {
        assert.equal(res.status, 503, `${what}: ${res.text}`);
        assert.equal(res.body.error, 'statement_timeout', what);
        assert.equal(res.headers.get('retry-after'), '2');
        assert.ok(
          res.ms >= STATEMENT_TIMEOUT_MS - 50 && res.ms < STATEMENT_TIMEOUT_MS + within(SLACK_MS),
          `${what} answered after ${Math.round(res.ms)} ms (DB_STATEMENT_TIMEOUT_MS ${STATEMENT_TIMEOUT_MS})`,
        );
      }
      assert.equal(group[0].status, 503);
      assert.equal(group[0].body.error, 'statement_timeout');
      for (const res of group)
        assert.ok(
          res.status === 201 || (res.status === 503 && res.body.error === 'statement_timeout'),
          res.text,
        );
      assert.ok(
        bounded.logs.some((l) => l.msg === 'statement timed out' && l.err?.code === '57014'),
        'logged by its SQLSTATE',
      );
    } finally {
      await holder.query(
        'DROP TRIGGER IF EXISTS sleepy ON users; DROP FUNCTION IF EXISTS sleepy()',
      );
      await holder.end();
    }
    // The limits are the transactions', not the server connections': none of the pooler's server
    // connections carries one afterwards (each of these lands on whichever is free).
    assert.equal((await bounded.postUsers(makeUsers(1000))).status, 201);
    const seen = await Promise.all(
      Array.from({ length: 3 * POOL_SIZE }, async () => {
        const client = new pg.Client(pooler.url);
        client.on('error', () => {});
        await client.connect();
        try {
          const { rows } = await client.query(
            "SELECT current_setting('statement_timeout') AS statement, current_setting('lock_timeout') AS lock, pg_sleep(0.05)",
          );
          return `${rows[0].statement}/${rows[0].lock}`;
        } finally {
          await client.end();
        }
      }),
    );
    assert.deepEqual([...new Set(seen)], ['0/0'], 'no server connection keeps a time limit');
    assertLogClean(bounded.logs);
  });
});
