import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { PostgrestClient } from '@supabase/postgrest-js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { makeUsers } from '../../../test/support/users.js';
import { WRITE_VARIANTS } from '../../../test/support/write-variants.js';

// Erasure against the real service and PostgreSQL: PostgREST's delete (driven by postgrest-js) and
// POST /erasures erase every copy of a user (the row, the items set aside naming them, the answers
// stored under Idempotency-Keys), and the tombstone keeps any replay from bringing them back, under
// every strategy, grouped or not, in both modes. Each test checks the answer, the tables and the log.

const KEY = 'an erasure key of forty characters, test!';
const OLD = '2026-01-01T00:00:00Z';
const FUTURE = '2999-01-01T00:00:00Z';

/**
 * Every row of every table of the schema as text: what a data dump holds.
 * @param {import('pg').Pool} pool
 */
async function everything(pool) {
  const { rows: tables } = await pool.query(
    `SELECT quote_ident(table_name) AS t FROM information_schema.tables
     WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`,
  );
  let text = '';
  for (const { t } of tables) {
    const { rows } = await pool.query(`SELECT x::text AS row FROM ${t} AS x`);
    text += rows.map((r) => r.row).join('\n');
  }
  return text;
}

for (const { label, env } of WRITE_VARIANTS) {
  describe(`erasure (${label})`, () => {
    const ctx = useAppAndDatabase({ ...env, ERASURE_KEY: KEY, INSERT_CHUNK_ROWS: '3' });
    const users = () => new PostgrestClient(ctx.app.baseUrl).from('users');
    /** @param {string[]} emails */
    const stored = async (emails) =>
      (await ctx.db.pool.query('SELECT email FROM users WHERE email = ANY($1)', [emails])).rows;
    /** @param {unknown} body @param {Record<string, string>} [headers] */
    const post = (body, headers = {}) =>
      fetch(`${ctx.app.baseUrl}/users`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      });
    /** @param {unknown} body */
    const erase = (body) =>
      fetch(`${ctx.app.baseUrl}/erasures`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });

    test('a keyed representation with an item set aside, erased with postgrest-js: no copy is left, and no replay brings it back', async () => {
      const [first, sibling] = makeUsers(2);
      const tag = first.email.split('-')[1];
      const user = {
        email: first.email,
        name: `Erased ${tag}`,
        phone: `+49${parseInt(tag, 16)}`.slice(0, 16),
        passwordHash: `$argon2id$v=19$m=65536,t=3,p=4$${tag}`,
      };
      const named = { email: user.email.toUpperCase(), name: `Bad\u0001${tag}`, phone: user.phone };
      const key = `"erase-${tag}"`;
      const create = () =>
        post([user, named, sibling], {
          'idempotency-key': key,
          prefer: 'return=representation, invalid=quarantine',
        });
      const created = await create();
      assert.equal(created.status, 201, await created.clone().text());
      assert.equal((await created.json()).length, 2);

      const started = performance.now();
      const { data, error, status, count } = await users()
        .delete({ count: 'exact' })
        .eq('email', user.email)
        .select();
      const tookMs = performance.now() - started;
      assert.equal(error, null);
      assert.equal(status, 200);
      assert.equal(count, 1);
      assert.deepEqual(
        data?.map((r) => [r.email, r.name, r.phone]),
        [[user.email, user.name, user.phone]],
      );
      assert.ok(tookMs < 5000, `the erasure took ${tookMs} ms`);

      const dump = await everything(ctx.db.pool);
      for (const value of [user.email, user.name, user.phone, user.passwordHash])
        assert.ok(
          !dump.toLowerCase().includes(value.toLowerCase()),
          `no copy of ${value} in ${dump}`,
        );
      assert.ok(dump.includes(sibling.email), 'the other user is still there');

      const replay = await create();
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      assert.equal(replay.headers.get('users-erased'), '1');
      const replayed = await replay.text();
      for (const value of [user.email, user.name]) assert.ok(!replayed.includes(value));
      assert.ok(replayed.includes(sibling.email));

      const again = await post([user]);
      assert.equal(again.status, 200);
      assert.deepEqual(await again.json(), {
        received: 1,
        inserted: 0,
        updated: 0,
        stale: 1,
        duplicates: 0,
      });
      assert.deepEqual(await stored([user.email]), [], 'the create again is not stored');

      const newer = await post([{ ...user, changedAt: FUTURE }]);
      assert.equal(newer.status, 201);
      assert.equal((await newer.json()).inserted, 1);
      assert.equal((await stored([user.email])).length, 1, 'a newer change is stored');

      const logged = JSON.stringify(ctx.app.logs);
      assert.ok(!logged.includes(user.email.split('@')[0]), 'no email in the log');
      assert.ok(
        ctx.app.logs.some((l) => l.msg === 'erasure' && l.erased === 1 && l.absent === 0),
        'the audit line',
      );
    });

    test('POST /erasures: stored ones erased, absent ones tombstoned; older writes stale, in both modes and in groups', async () => {
      const [a, b, c] = makeUsers(3);
      assert.equal((await post([a, b])).status, 201);
      const res = await erase([
        { email: a.email },
        { email: c.email, changedAt: '2026-06-01T00:00:00Z' },
      ]);
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { received: 2, erased: 1, absent: 1 });
      assert.deepEqual(await stored([a.email, b.email, c.email]), [{ email: b.email }]);

      const merged = await post([{ ...a, changedAt: OLD }, { ...c, changedAt: OLD }, b], {
        prefer: 'resolution=merge-duplicates',
      });
      assert.deepEqual(await merged.json(), {
        received: 3,
        inserted: 0,
        updated: 0,
        stale: 3,
        duplicates: 1,
      });
      const oneByOne = await Promise.all([a, c].map((u) => post([u])));
      for (const r of oneByOne) assert.equal((await r.json()).stale, 1);
      const newerThanC = await post([{ ...c, changedAt: '2026-06-01T00:00:01Z' }]);
      assert.equal((await newerThanC.json()).inserted, 1);
      assert.deepEqual(await stored([a.email, c.email]), [{ email: c.email }]);
    });

    test('POST /erasures: NDJSON as an array; a key replays its counts, erasing nothing again', async () => {
      const [a, b] = makeUsers(2);
      await post([a, b]);
      /** @param {string} body @param {Record<string, string>} headers */
      const send = (body, headers) =>
        fetch(`${ctx.app.baseUrl}/erasures`, { method: 'POST', headers, body });
      const ndjson = `{"email":"${a.email}"}\n\n{"email":"${b.email.toUpperCase()}"}\n`;
      const key = `"ndjson-${a.email.split('-')[1]}"`;
      const headers = { 'content-type': 'application/x-ndjson', 'idempotency-key': key };
      const first = await send(ndjson, headers);
      assert.equal(first.status, 200);
      assert.deepEqual(await first.json(), { received: 2, erased: 2, absent: 0 });
      const again = await send(ndjson, headers);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(await again.json(), { received: 2, erased: 2, absent: 0 });
      const other = await send(`{"email":"${a.email}"}`, headers);
      assert.equal(other.status, 422);
      const bad = await send(`{"email":"${a.email}"}\nnot json`, {
        'content-type': 'application/x-ndjson',
      });
      assert.equal(bad.status, 400);
      assert.match((await bad.json()).message, /line 2/);
      assert.deepEqual(await stored([a.email, b.email]), []);
      const erasedLines = ctx.app.logs.filter((l) => l.msg === 'erasure');
      assert.equal(erasedLines.at(-1).erased, 2, 'the replay erased nothing and logged nothing');
    });

    test('a streamed import leaves out the erased emails, in both modes', async () => {
      const [a, b] = makeUsers(2);
      assert.equal(
        (await erase([{ email: a.email, changedAt: '2026-06-01T00:00:00Z' }])).status,
        200,
      );
      /** @param {object[]} lines @param {string} [prefer] */
      const stream = (lines, prefer) =>
        fetch(`${ctx.app.baseUrl}/users`, {
          method: 'POST',
          headers: { 'content-type': 'application/x-ndjson', ...(prefer ? { prefer } : {}) },
          body: lines.map((l) => JSON.stringify(l)).join('\n'),
        });
      const ignoring = await stream([a, b, { ...a, changedAt: OLD }]);
      assert.equal(ignoring.status, 201);
      assert.deepEqual(await ignoring.json(), {
        received: 3,
        inserted: 1,
        updated: 0,
        stale: 1,
        duplicates: 1,
      });
      const merging = await stream([{ ...a, changedAt: OLD }, b], 'resolution=merge-duplicates');
      const merged = await merging.json();
      assert.equal(merged.inserted, 0);
      assert.equal(merged.stale, 2);
      assert.deepEqual(await stored([a.email, b.email]), [{ email: b.email }]);
      const newer = await stream([{ ...a, changedAt: FUTURE }], 'resolution=merge-duplicates');
      assert.equal((await newer.json()).inserted, 1);
      assert.equal((await stored([a.email])).length, 1);
    });

    test('bad filters and items: 400, nothing erased', async () => {
      const [a] = makeUsers(1);
      await post([a]);
      const del = (/** @type {string} */ query) =>
        fetch(`${ctx.app.baseUrl}/users${query}`, { method: 'DELETE' });
      const cases = [
        ['', '21000'],
        ['?name=eq.x', 'PGRST100'],
        [`?email=like.${a.email}`, 'PGRST100'],
        ['?email=eq.not-an-email', 'PGRST100'],
        [`?email=eq.${a.email}&email=eq.${a.email}`, 'PGRST100'],
      ];
      for (const [query, code] of cases) {
        const res = await del(query);
        assert.equal(res.status, 400, query);
        assert.equal((await res.json()).code, code, query);
      }
      const bad = await erase([
        { email: a.email },
        { email: 'nope' },
        { email: a.email, name: 'x' },
      ]);
      assert.equal(bad.status, 400);
      const body = await bad.json();
      assert.equal(body.error, 'invalid_batch');
      assert.deepEqual(
        body.errors.map((/** @type {any} */ e) => [e.index, e.field]),
        [
          [1, 'email'],
          [2, 'name'],
        ],
      );
      assert.equal((await stored([a.email])).length, 1, 'nothing erased');
      const tombstones = await ctx.db.pool.query('SELECT count(*)::int AS n FROM erasures');
      const before = tombstones.rows[0].n;
      assert.equal((await del(`?email=in.(${a.email},"x@y.z")`)).status, 204);
      assert.deepEqual(await stored([a.email]), []);
      const after = await ctx.db.pool.query('SELECT count(*)::int AS n FROM erasures');
      assert.equal(after.rows[0].n, before + 2);
    });
  });
}

describe('erasure: a right of its own', () => {
  const ctx = useAppAndDatabase({
    ERASURE_KEY: KEY,
    INGEST_TOKENS: JSON.stringify({
      writer: 'writer-token-0123456789abcdef',
      ops: { token: 'ops-token-0123456789abcdef', erase: true },
    }),
  });
  /** @param {string} token @param {string} method @param {string} path @param {unknown} [body] */
  const send = (token, method, path, body) =>
    fetch(`${ctx.app.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  test('a client without it: 403 forbidden, nothing erased; one with it erases', async () => {
    const [a] = makeUsers(1);
    assert.equal((await send('writer-token-0123456789abcdef', 'POST', '/users', [a])).status, 201);
    const refusals = [
      await send('writer-token-0123456789abcdef', 'DELETE', `/users?email=eq.${a.email}`),
      await send('writer-token-0123456789abcdef', 'POST', '/erasures', [{ email: a.email }]),
    ];
    for (const res of refusals) {
      assert.equal(res.status, 403, JSON.stringify(ctx.app.logs.slice(-3)));
      const body = await res.json();
      assert.equal(body.error, 'forbidden');
      assert.equal(body.code, '42501');
    }
    const rows = async () =>
      (await ctx.db.pool.query('SELECT count(*)::int AS n FROM users WHERE email = $1', [a.email]))
        .rows[0].n;
    assert.equal(await rows(), 1, 'nothing erased');
    const tombstones = await ctx.db.pool.query('SELECT count(*)::int AS n FROM erasures');
    assert.equal(tombstones.rows[0].n, 0, 'no tombstone either');
    const erased = await send('ops-token-0123456789abcdef', 'DELETE', `/users?email=eq.${a.email}`);
    assert.equal(erased.status, 204);
    assert.equal(await rows(), 0);
    const logged = JSON.stringify(ctx.app.logs);
    assert.ok(!logged.includes('token-0123456789abcdef'), 'no token in the log');
    assert.ok(!logged.includes(a.email), 'no email in the log');
  });
});
