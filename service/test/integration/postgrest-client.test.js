import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { PostgrestClient } from '@supabase/postgrest-js';
import { GROUP_LOCK_TIMEOUT_MS } from '../../src/users/write-policy.js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { responseChecker } from '../../../test/support/openapi-check.js';
import { makeUsers } from '../../../test/support/users.js';
import { within } from '../../../test/support/time-factor.js';
import { waitUntil } from '../../../test/support/wait.js';
import { WRITE_VARIANTS } from '../../../test/support/write-variants.js';

// PostgREST's insert and upsert on POST /users, driven by PostgREST's own client
// (@supabase/postgrest-js, used as its users use it) against the real service and PostgreSQL,
// under every strategy with group commit on and off (a representation is each request's own rows
// either way).

/** A timestamp as PostgreSQL's JSON gives it (PostgREST's form): microseconds and the session's offset. */
const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?[+-]\d\d:\d\d$/;

/**
 * Rows as PostgreSQL's JSON shows them stored: what a representation must equal, to the
 * microsecond and the offset.
 * @param {import('pg').Pool} pool @param {string[]} emails
 */
const storedAsJson = async (pool, emails) =>
  new Map(
    (
      await pool.query(
        `SELECT email, name, phone, to_json(created_at) #>> '{}' AS "createdAt", to_json(updated_at) #>> '{}' AS "updatedAt"
    FROM users WHERE email = ANY($1)`,
        [emails],
      )
    ).rows.map((r) => [r.email, r]),
  );

for (const { label, env } of WRITE_VARIANTS) {
  describe(`postgrest-js against POST /users (${label})`, () => {
    // Chunks of 3 rows: a request of a few users alone is several statements in one transaction.
    const ctx = useAppAndDatabase({ ...env, INSERT_CHUNK_ROWS: '3' });
    const users = () => new PostgrestClient(ctx.app.baseUrl).from('users');
    /** @param {string[]} emails */
    const stored = async (emails) =>
      new Map(
        (
          await ctx.db.pool.query(
            'SELECT email, name, phone, password_hash, updated_at FROM users WHERE email = ANY($1)',
            [emails],
          )
        ).rows.map((r) => [r.email, r]),
      );

    /** @param {string[]} emails */
    const asStored = (emails) => storedAsJson(ctx.db.pool, emails);

    test("insert stores the users; without a return preference the answer is sluice's counts", async () => {
      const batch = makeUsers(3);
      const { data, error, status } = await users().insert(batch);
      assert.equal(error, null);
      assert.equal(status, 201);
      assert.deepEqual(data, { received: 3, inserted: 3, updated: 0, duplicates: 0 });
      assert.equal((await stored(batch.map((u) => u.email))).size, 3);
    });

    test('insert().select(): the rows as stored, in the order sent, never the password hash', async () => {
      const batch = makeUsers(4).reverse();
      batch[0] = { ...batch[0], email: batch[0].email.toUpperCase() };
      const { data, error, status } = await users().insert(batch).select();
      assert.equal(error, null);
      assert.equal(status, 201);
      assert.ok(Array.isArray(data));
      assert.deepEqual(
        data.map((r) => r.email),
        batch.map((u) => u.email.toLowerCase()),
      );
      for (const [i, row] of data.entries()) {
        assert.deepEqual(Object.keys(row), ['email', 'name', 'phone', 'createdAt', 'updatedAt']);
        assert.equal(row.name, batch[i].name);
        assert.equal(row.phone, batch[i].phone);
        assert.match(row.createdAt, TIMESTAMP);
        assert.equal(row.updatedAt, null, 'inserted, never updated');
      }
      const rows = await asStored(batch.map((u) => u.email.toLowerCase()));
      for (const row of data)
        assert.deepEqual(row, rows.get(row.email), 'as stored, to the microsecond');
    });

    test('upsert().select() of a stored user sent without a phone: the phone it kept, and when it was updated', async () => {
      const [a, b] = makeUsers(2);
      assert.equal((await users().insert([a])).error, null);
      const { data, error } = await users()
        .upsert([{ email: a.email, name: 'Renamed' }, b], { onConflict: 'email' })
        .select();
      assert.equal(error, null, JSON.stringify(error));
      const rows = await asStored([a.email, b.email]);
      assert.deepEqual(data, [rows.get(a.email), rows.get(b.email)]);
      assert.equal(data?.[0].phone, a.phone);
      assert.match(data?.[0].updatedAt, TIMESTAMP);
    });

    test('a request too large to be grouped, written in several statements: all its rows, in order', async () => {
      const batch = makeUsers(150);
      const { data, error } = await users().insert(batch.slice(0, 10));
      assert.equal(error, null, JSON.stringify(data));
      const answer = await users()
        .upsert(
          batch.map((u, i) => (i < 5 ? { ...u, name: 'Renamed' } : u)),
          { onConflict: 'email' },
        )
        .select('email,name');
      assert.equal(answer.error, null);
      assert.deepEqual(
        answer.data,
        batch
          .filter((_, i) => i < 5 || i >= 10)
          .map((u, i) => ({ email: u.email, name: i < 5 ? 'Renamed' : u.name })),
      );
    });

    test("sluice's per-item report: outcome in select gives every item, in order, with what became of it", async () => {
      const [a, b, c] = makeUsers(3);
      await users().insert([a, b]);
      const { data, error } = await users()
        .upsert(
          [
            c,
            { email: a.email.toUpperCase(), name: 'Merged' },
            b,
            { email: c.email, name: 'C again' },
          ],
          { onConflict: 'email' },
        )
        .select('email,outcome,name');
      assert.equal(error, null);
      assert.deepEqual(data, [
        { email: c.email, outcome: 'inserted', name: 'C again' },
        { email: a.email, outcome: 'updated', name: 'Merged' },
        { email: b.email, outcome: 'skipped', name: null },
        { email: c.email, outcome: 'repeated', name: null },
      ]);
    });

    test('select with columns: only those, in the order asked', async () => {
      const batch = makeUsers(2);
      const { data, error } = await users().insert(batch).select('name,email');
      assert.equal(error, null);
      assert.deepEqual(
        data,
        batch.map((u) => ({ name: u.name, email: u.email })),
      );
    });

    test('upsert ignoreDuplicates: stored rows are left alone and not in the representation', async () => {
      const [a, b, c] = makeUsers(3);
      await users().insert([a, b]);
      const { data, error, status } = await users()
        .upsert([{ ...a, name: 'changed' }, c, { ...b, name: 'changed' }], {
          onConflict: 'email',
          ignoreDuplicates: true,
        })
        .select();
      assert.equal(error, null);
      assert.equal(status, 201);
      assert.deepEqual(
        data?.map((r) => r.email),
        [c.email],
      );
      assert.equal((await stored([a.email])).get(a.email).name, a.name);
    });

    test('upsert (merge): updated and inserted rows, as stored after the merge; unchanged rows are not written', async () => {
      const [a, b, c] = makeUsers(3);
      await users().insert([a, b]);
      const { data, error, status } = await users()
        .upsert([c, { email: a.email, name: 'Merged' }, b], { onConflict: 'email' })
        .select();
      assert.equal(error, null);
      assert.equal(status, 201);
      assert.deepEqual(
        data?.map((r) => [r.email, r.name, r.phone]),
        [
          [c.email, c.name, c.phone],
          [a.email, 'Merged', a.phone],
        ],
      );
      assert.equal(data?.[0].updatedAt, null);
      assert.match(data?.[1].updatedAt, TIMESTAMP);
      assert.equal(
        (await stored([a.email])).get(a.email).password_hash,
        a.passwordHash,
        'an omitted field keeps its stored value',
      );
    });

    test('count: exact answers Content-Range */<rows affected>, with or without a representation', async () => {
      const [a, b, c] = makeUsers(3);
      const first = await users().insert([a, b], { count: 'exact' });
      assert.equal(first.error, null);
      assert.equal(first.count, 2);
      const second = await users()
        .upsert([{ ...a, name: 'New name' }, b, c], { onConflict: 'email', count: 'exact' })
        .select('email');
      assert.equal(second.error, null);
      assert.equal(second.count, 2, 'a updated, c inserted, b unchanged');
      assert.deepEqual(second.data, [{ email: a.email }, { email: c.email }]);
    });

    test('upsert onConflict on a column that is not unique is refused, naming it; nothing is written', async () => {
      const batch = makeUsers(2);
      const { data, error, status } = await users().upsert(batch, { onConflict: 'phone' });
      assert.equal(status, 400);
      assert.equal(data, null);
      assert.equal(error?.code, '42P10');
      assert.match(error?.message ?? '', /phone/);
      assert.equal(typeof error?.hint, 'string');
      assert.equal((await stored(batch.map((u) => u.email))).size, 0);
      const unknown = await users().upsert(batch, { onConflict: 'nickname' });
      assert.equal(unknown.status, 400);
      assert.equal(unknown.error?.code, 'PGRST204');
      assert.match(unknown.error?.message ?? '', /nickname/);
    });

    test("a 400 is an error object with code, message, details and hint, and sluice's own fields beside them", async () => {
      const [a] = makeUsers(1);
      const { data, error, status } = await users().insert([
        a,
        { email: 'not-an-email', name: 'X' },
      ]);
      assert.equal(status, 400);
      assert.equal(data, null);
      assert.ok(error);
      assert.equal(error.code, '23514');
      assert.match(error.message, /1 of 2 users are invalid/);
      assert.match(error.details, /\[1\]\.email/);
      assert.equal(error.hint, null);
      const raw = /** @type {any} */ (error);
      assert.equal(raw.error, 'invalid_batch');
      assert.deepEqual(
        raw.errors.map((/** @type {any} */ e) => [e.index, e.field]),
        [[1, 'email']],
      );
      const plaintext = await users().insert([
        { email: a.email, name: a.name, password: 'secret' },
      ]);
      assert.equal(plaintext.status, 400, 'a password among ?columns still meets the validator');
      assert.match(
        plaintext.error?.details ?? '',
        /\[0\]\.password plaintext passwords are never accepted/,
      );
    });

    test('?columns: the other keys of each object are ignored; an unknown column is refused', async () => {
      const url = `${ctx.app.baseUrl}/users?columns=${encodeURIComponent('"email","name"')}`;
      const post = (/** @type {string} */ to, /** @type {unknown} */ body, prefer = '') =>
        fetch(to, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(prefer ? { prefer } : {}) },
          body: JSON.stringify(body),
        });
      const [b] = makeUsers(1);
      const ok = await post(url, [
        { email: b.email, name: b.name, nickname: 'ignored', phone: '+1555000' },
      ]);
      assert.equal(ok.status, 201, await ok.clone().text());
      assert.equal((await stored([b.email])).get(b.email).phone, null, 'phone was not in ?columns');
      const bad = await post(`${ctx.app.baseUrl}/users?columns=email,nickname`, [b]);
      assert.equal(bad.status, 400);
      const body = await bad.json();
      assert.equal(body.code, 'PGRST204');
      assert.equal(body.error, 'unknown_column');
      assert.match(body.message, /nickname/);
    });

    test('return=minimal and headers-only: no body; Preference-Applied lists what was honoured; handling=strict refuses the rest', async () => {
      const post = (/** @type {unknown} */ body, /** @type {string} */ prefer) =>
        fetch(`${ctx.app.baseUrl}/users`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', prefer },
          body: JSON.stringify(body),
        });
      const minimal = await post(makeUsers(1), 'return=minimal, tx=rollback');
      assert.equal(minimal.status, 201);
      assert.equal(await minimal.text(), '');
      assert.equal(minimal.headers.get('preference-applied'), 'return=minimal');
      const both = await post(
        makeUsers(2),
        'count=exact, return=headers-only, resolution=ignore-duplicates',
      );
      assert.equal(both.status, 201);
      assert.equal(await both.text(), '');
      assert.equal(
        both.headers.get('preference-applied'),
        'resolution=ignore-duplicates, return=headers-only, count=exact',
      );
      assert.equal(both.headers.get('content-range'), '*/2');
      const strict = await post(makeUsers(1), 'handling=strict, return=minimal, foo, tx=rollback');
      assert.equal(strict.status, 400);
      assert.deepEqual(await strict.json(), {
        error: 'unsupported_preference',
        message: 'Invalid preferences given with handling=strict',
        code: 'PGRST122',
        details: 'Invalid preferences: foo, tx=rollback',
        hint: null,
      });
    });

    test("representations, reports and PostgREST's error bodies are as /openapi.json describes them", async () => {
      const check = responseChecker(await (await fetch(`${ctx.app.baseUrl}/openapi.json`)).json());
      /** @param {string} query @param {unknown} body @param {string} prefer */
      const answer = async (query, body, prefer) => {
        const res = await fetch(`${ctx.app.baseUrl}/users${query}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', prefer },
          body: JSON.stringify(body),
        });
        return { status: res.status, headers: res.headers, body: await res.json() };
      };
      const [a, b] = makeUsers(2);
      check('post', '/users', await answer('?select=*', [a], 'return=representation, count=exact'));
      check(
        'post',
        '/users',
        await answer('?select=email,outcome', [a, b], 'return=representation'),
      );
      check(
        'post',
        '/users',
        await answer('?on_conflict=name', [a], 'resolution=merge-duplicates'),
      );
      check('post', '/users', await answer('', [a], 'handling=strict, tx=rollback'));
    });

    test('concurrent requests, some asking for their rows: each gets exactly its own', async () => {
      const batches = Array.from({ length: 24 }, () => makeUsers(3));
      // Every third request replays the previous one's first user, so groups resolve conflicts too.
      for (let i = 3; i < batches.length; i += 3) batches[i][0] = batches[i - 1][0];
      // Whichever of the two requests with a shared email is written first inserts it.
      const shared = new Set(
        batches.filter((_, i) => i >= 3 && i % 3 === 0).map((b) => b[0].email),
      );
      const answers = await Promise.all(
        batches.map((batch, i) =>
          i % 2 === 0 ? users().insert(batch).select() : users().insert(batch),
        ),
      );
      const firstSeen = new Set();
      for (const [i, { data, error }] of answers.entries()) {
        assert.equal(error, null);
        if (i % 2 === 1) {
          assert.equal(data?.received, 3);
          continue;
        }
        const emails = /** @type {any[]} */ (data).map((r) => r.email);
        assert.ok(
          emails.every((e) => batches[i].some((u) => u.email === e)),
          'only its own emails',
        );
        for (const u of batches[i])
          if (!shared.has(u.email))
            assert.ok(emails.includes(u.email), `request ${i}: ${u.email} missing`);
        for (const e of emails) {
          assert.ok(!firstSeen.has(e), `${e} reported inserted twice`);
          firstSeen.add(e);
        }
      }
    });
  });
}

describe("postgrest-js: a representation whose row another writer holds (group commit's slow lane)", () => {
  const ctx = useAppAndDatabase({ GROUP_COMMIT: 'on', DB_LOCK_TIMEOUT_MS: '10000' });

  test('it waits for the row, then gets its own rows; requests grouped with it are not held back', async () => {
    const users = () => new PostgrestClient(ctx.app.baseUrl).from('users');
    const [held, fresh, other] = makeUsers(3);
    assert.equal((await users().insert([held])).error, null);
    const holder = await ctx.db.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT FROM users WHERE email = $1 FOR UPDATE', [held.email]);
      // A builder sends when awaited: then() sends it now, while the row is held.
      /** @type {{ answer?: unknown }} */
      const settled = {};
      const locked = users()
        .upsert([{ ...held, name: 'After the lock' }, fresh], { onConflict: 'email' })
        .select('email,name')
        .then((answer) => Object.assign(settled, { answer }).answer);
      const started = performance.now();
      const { data, error } = await users().insert([other]).select('email');
      assert.equal(error, null);
      assert.deepEqual(data, [{ email: other.email }]);
      assert.ok(
        performance.now() - started < within(1500),
        'a request grouped with the locked one answers without waiting for the lock',
      );
      // Waiting on the row for longer than a group's or a lone request's brief lock timeout: only the
      // slow lane, under DB_LOCK_TIMEOUT_MS, waits so long.
      await waitUntil(
        async () => {
          if ('answer' in settled)
            throw new Error(
              `the locked request answered while the row was held: ${JSON.stringify(settled.answer)}`,
            );
          const { rows } = await ctx.db.pool.query(
            `SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
          AND wait_event_type = 'Lock' AND clock_timestamp() - query_start > make_interval(secs => $1 / 1000.0)`,
            [2 * GROUP_LOCK_TIMEOUT_MS],
          );
          return rows.length === 1;
        },
        'the locked request waiting on the row in the slow lane',
        within(3000),
        50,
      );
      await holder.query('COMMIT');
      const answer = await locked;
      assert.equal(answer.error, null, JSON.stringify(answer.error));
      assert.deepEqual(answer.data, [
        { email: held.email, name: 'After the lock' },
        { email: fresh.email, name: fresh.name },
      ]);
    } finally {
      holder.release();
    }
  });
});

describe("postgrest-js: every column (pg's rows serialised as they come) and a selection (picked from them) tell the same", () => {
  // Group commit off and the default chunk: one statement a request.
  const ctx = useAppAndDatabase({ GROUP_COMMIT: 'off' });
  const users = () => new PostgrestClient(ctx.app.baseUrl).from('users');

  for (const resolution of /** @type {const} */ (['ignore', 'merge'])) {
    test(`${resolution}: in the order sent, each email once where first sent, stored ones ${resolution === 'merge' ? 'updated' : 'left out'}`, async () => {
      const [a, b, c, d] = makeUsers(4);
      assert.equal((await users().insert([a, b])).error, null);
      const batch = [
        c,
        { ...a, email: a.email.toUpperCase(), name: 'Renamed' },
        b,
        { email: d.email, name: d.name },
        { ...c, name: 'C again' },
      ];
      const upsert = () =>
        users().upsert(batch, { onConflict: 'email', ignoreDuplicates: resolution === 'ignore' });
      const whole = await upsert().select();
      assert.equal(whole.error, null, JSON.stringify(whole.error));
      const expected =
        resolution === 'merge'
          ? [
              { email: c.email, name: 'C again' },
              { email: a.email, name: 'Renamed' },
              { email: d.email, name: d.name },
            ]
          : [
              { email: c.email, name: c.name },
              { email: d.email, name: d.name },
            ];
      assert.deepEqual(
        whole.data?.map((r) => ({ email: r.email, name: r.name })),
        expected,
      );
      const rows = await storedAsJson(
        ctx.db.pool,
        batch.map((u) => u.email.toLowerCase()),
      );
      for (const row of whole.data ?? []) {
        assert.deepEqual(Object.keys(row), ['email', 'name', 'phone', 'createdAt', 'updatedAt']);
        assert.match(row.createdAt, TIMESTAMP);
        assert.deepEqual(row, rows.get(row.email), 'as stored, to the microsecond');
      }
      // The same request again, the columns picked from the rows written: the same rows (merge
      // leaves them unchanged now, so the second answer is read back from the first).
      await ctx.db.pool.query('DELETE FROM users WHERE email = ANY($1)', [[c.email, d.email]]);
      if (resolution === 'merge')
        await ctx.db.pool.query('UPDATE users SET name = $2, updated_at = NULL WHERE email = $1', [
          a.email,
          a.name,
        ]);
      const picked = await upsert().select('updatedAt,createdAt,phone,name,email');
      assert.equal(picked.error, null, JSON.stringify(picked.error));
      assert.deepEqual(
        picked.data?.map((r) => ({
          email: r.email,
          name: r.name,
          phone: r.phone,
          updated: r.updatedAt !== null,
        })),
        whole.data?.map((r) => ({
          email: r.email,
          name: r.name,
          phone: r.phone,
          updated: r.updatedAt !== null,
        })),
      );
    });
  }
});
