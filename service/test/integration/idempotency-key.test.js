import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { SignJWT } from 'jose';
import pg from 'pg';
import pino from 'pino';
import { createDatabase } from '../../src/db/database.js';
import { createKeyStore, purgeExpiredKeys } from '../../src/users/idempotency-keys.js';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { startPgBouncer } from '../../../test/support/pgbouncer.js';
import { makeUsers, uniqueTag } from '../../../test/support/users.js';
import { waitUntil } from '../../../test/support/wait.js';
import { within } from '../../../test/support/time-factor.js';

// Idempotency-Key on POST /users against the real PostgreSQL: a retry gets its first answer byte for
// byte (JSON, NDJSON, CSV, a representation, merge mode), on the same app and on another started on
// the same database; another body under the key is 422; a key in flight is waited for, then 409;
// the same key at once writes once; keys are per client (a token and a JWT of one name are two); a
// malformed key is 400; expired keys are purged and are new again; without the header nothing is stored.

const NDJSON = 'application/x-ndjson';
const CSV = 'text/csv';
const TOKENS = { feeder: 'feeder-token-0123456789abcdef', crm: 'crm-token-0123456789abcdef' };

/** @param {string} key */
const keyed = (key, headers = {}) => ({ 'idempotency-key': `"${key}"`, ...headers });
/** @param {{ email: string, name: string }[]} users */
const ndjson = (users) => users.map((u) => JSON.stringify(u)).join('\n');
/** @param {{ email: string, name: string }[]} users */
const csv = (users) => `email,name\n${users.map((u) => `${u.email},${u.name}`).join('\n')}\n`;

/** The parts of an answer a replay must repeat: status, the headers that carry meaning, the body's bytes. @param {Awaited<ReturnType<Awaited<ReturnType<typeof startTestApp>>['postUsers']>>} res */
const asSent = (res) => ({
  status: res.status,
  text: res.text,
  contentType: res.headers.get('content-type'),
  contentRange: res.headers.get('content-range'),
  applied: res.headers.get('preference-applied'),
});

describe('Idempotency-Key on POST /users', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
  const env = { INGEST_TOKENS: JSON.stringify(TOKENS), DB_LOCK_TIMEOUT_MS: '1500' };
  before(async () => {
    db = await createTestDatabase();
    app = await startTestApp({ databaseUrl: db.url, env });
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });
  /** @param {unknown} body @param {Record<string, string>} headers @param {string} [contentType] */
  const post = (body, headers, contentType) =>
    app.postUsers(body, { token: TOKENS.feeder, headers, contentType });
  /** @param {string} key */
  const keyRow = async (key) =>
    (
      await db.pool.query(
        "SELECT client, outcome->'written' AS written, status, body FROM idempotency_keys WHERE key = $1",
        [key],
      )
    ).rows;

  test('a JSON batch: the retry gets the first answer byte for byte, marked replayed, and writes nothing', async () => {
    const key = `json-${uniqueTag()}`;
    const users = makeUsers(50);
    const first = await post(users, keyed(key));
    assert.equal(first.status, 201, first.text);
    assert.deepEqual(first.body, { received: 50, inserted: 50, updated: 0, duplicates: 0 });
    assert.equal(first.headers.get('idempotent-replayed'), null, 'a first answer is no replay');
    const again = await post(users, keyed(key));
    assert.deepEqual(asSent(again), asSent(first));
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    const without = await post(users, {});
    assert.deepEqual(
      without.body,
      { received: 50, inserted: 0, updated: 0, duplicates: 50 },
      "without the key: today's answer",
    );
    assert.deepEqual(
      await keyRow(key),
      [
        {
          client: 'token:feeder',
          written: { received: 50, inserted: 50, updated: 0 },
          status: null,
          body: null,
        },
      ],
      'what the write did is stored, not an answer: the replay renders it again',
    );
    assert.equal(await db.countUsers(), 50);
  });

  test('return=representation in merge mode, count=exact: the rows the first attempt wrote, again', async () => {
    const key = `rep-${uniqueTag()}`;
    const users = makeUsers(30);
    await post(users.slice(0, 10), {}); // stored already: the merge updates them
    const changed = users.map((u) => ({ ...u, name: `${u.name} changed` }));
    const headers = keyed(key, {
      prefer: 'return=representation, resolution=merge-duplicates, count=exact',
    });
    const first = await post(changed, headers);
    assert.equal(first.status, 201, first.text);
    assert.equal(first.body.length, 30);
    assert.equal(first.headers.get('content-range'), '*/30');
    const again = await post(changed, headers);
    assert.deepEqual(asSent(again), asSent(first));
    assert.equal(again.headers.get('idempotent-replayed'), 'true');
    assert.ok(asSent(first).applied?.includes('resolution=merge-duplicates'));
  });

  test('every answer rendered again from the stored outcome is the first byte for byte (representation with outcome, items set aside, a group)', async () => {
    const users = makeUsers(6);
    await post(users.slice(0, 2), {});
    const withBad = [...users, { email: 'not an email', name: 'Bad' }, users[3]];
    for (const [label, prefer, query] of /** @type {const} */ ([
      ['counts, items set aside', 'invalid=quarantine', ''],
      [
        'representation with each outcome',
        'return=representation, invalid=quarantine',
        '?select=email,name,outcome',
      ],
      [
        'merge, headers only, count',
        'resolution=merge-duplicates, return=headers-only, count=exact, invalid=quarantine',
        '',
      ],
    ])) {
      const key = `render-${uniqueTag()}`;
      const send = () =>
        app.postUsers(withBad, {
          token: TOKENS.feeder,
          headers: keyed(key, { prefer }),
          path: `/users${query}`,
        });
      const first = await send();
      assert.ok(first.status < 300, `${label}: ${first.text}`);
      const again = await send();
      assert.equal(again.headers.get('idempotent-replayed'), 'true', label);
      assert.deepEqual(asSent(again), asSent(first), label);
      assert.equal(
        again.headers.get('quarantine-request-id'),
        first.headers.get('quarantine-request-id'),
        label,
      );
    }
  });

  test('an answer stored whole, before outcomes were stored, is replayed as it is', async () => {
    const key = `legacy-${uniqueTag()}`;
    const users = makeUsers(3);
    assert.equal((await post(users, keyed(key))).status, 201);
    await db.pool.query(
      `UPDATE idempotency_keys SET outcome = NULL, status = 201, body = '{"stored":"whole"}',
        headers = '{"Content-Type":"application/json; charset=utf-8"}' WHERE key = $1`,
      [key],
    );
    const again = await post(users, keyed(key));
    assert.deepEqual(
      [again.status, again.text, again.headers.get('idempotent-replayed')],
      [201, '{"stored":"whole"}', 'true'],
    );
  });

  test('NDJSON and CSV streams: replayed byte for byte, nothing written twice', async () => {
    for (const [type, body] of /** @type {const} */ ([
      [NDJSON, ndjson],
      [CSV, csv],
    ])) {
      const key = `stream-${uniqueTag()}`;
      const users = makeUsers(40).map(({ email, name }) => ({ email, name }));
      const before = await db.countUsers();
      const first = await post(body(users), keyed(key), type);
      assert.equal(first.status, 201, `${type}: ${first.text}`);
      const again = await post(body(users), keyed(key), type);
      assert.deepEqual(asSent(again), asSent(first), type);
      assert.equal(again.headers.get('idempotent-replayed'), 'true', type);
      assert.equal(await db.countUsers(), before + 40, type);
      const other = await post(
        body(makeUsers(2).map(({ email, name }) => ({ email, name }))),
        keyed(key),
        type,
      );
      assert.equal(other.status, 422, `${type}: ${other.text}`);
      assert.equal(other.body.error, 'idempotency_key_reused');
      assert.equal(await db.countUsers(), before + 40, `${type}: the other body wrote nothing`);
    }
  });

  test('merge-mode NDJSON with Prefer: the stored answer carries stale and Preference-Applied', async () => {
    const key = `stream-merge-${uniqueTag()}`;
    const users = makeUsers(5).map(({ email, name }) => ({ email, name }));
    const headers = keyed(key, { prefer: 'resolution=merge-duplicates' });
    const first = await post(ndjson([...users, ...users]), headers, NDJSON);
    assert.equal(first.status, 201, first.text);
    assert.equal(first.body.stale, 5);
    const again = await post(ndjson([...users, ...users]), headers, NDJSON);
    assert.deepEqual(asSent(again), asSent(first));
  });

  test('another body, Prefer or query under the same key: 422, nothing written', async () => {
    const key = `reuse-${uniqueTag()}`;
    const users = makeUsers(3);
    assert.equal((await post(users, keyed(key))).status, 201);
    const count = await db.countUsers();
    for (const [label, res] of [
      ['another body', await post(makeUsers(3), keyed(key))],
      ['another Prefer', await post(users, keyed(key, { prefer: 'resolution=merge-duplicates' }))],
      ['a body with one more user', await post([...users, ...makeUsers(1)], keyed(key))],
    ]) {
      assert.equal(res.status, 422, `${label}: ${res.text}`);
      assert.equal(res.body.error, 'idempotency_key_reused', label);
      assert.equal(res.body.code, '23505', label);
      assert.equal(res.headers.get('idempotent-replayed'), null, label);
    }
    assert.equal(await db.countUsers(), count, 'nothing written');
  });

  test('sluice_idempotent_replays_total counts each answer replayed, by client; a first answer, a 422 or a 409 is none', async () => {
    const replays = async (/** @type {string} */ client) => {
      const text = await (await fetch(`${app.baseUrl}/metrics`)).text();
      const found = text
        .split('\n')
        .find((line) => line.startsWith(`sluice_idempotent_replays_total{client="${client}"} `));
      return Number(found?.split(' ')[1] ?? 0);
    };
    const before = { feeder: await replays('feeder'), crm: await replays('crm') };
    const key = `metric-${uniqueTag()}`;
    const users = makeUsers(2);
    assert.equal((await post(users, keyed(key))).status, 201);
    assert.equal(await replays('feeder'), before.feeder, 'a first answer is no replay');
    assert.equal((await post(users, keyed(key))).headers.get('idempotent-replayed'), 'true');
    assert.equal(await replays('feeder'), before.feeder + 1);
    const stream = ndjson(makeUsers(2).map(({ email, name }) => ({ email, name })));
    const streamKey = `metric-stream-${uniqueTag()}`;
    assert.equal((await post(stream, keyed(streamKey), NDJSON)).status, 201);
    assert.equal(
      (await post(stream, keyed(streamKey), NDJSON)).headers.get('idempotent-replayed'),
      'true',
    );
    assert.equal(await replays('feeder'), before.feeder + 2, 'a stream replayed counts too');
    assert.equal((await post(makeUsers(2), keyed(key))).status, 422);
    const holder = new pg.Client(db.url);
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(
        "INSERT INTO idempotency_keys (client, key, expires_at) VALUES ('token:feeder', $1, now() + interval '1 hour')",
        [`${key}-held`],
      );
      assert.equal(
        (await post(users, keyed(`${key}-held`))).status,
        409,
        'a key another transaction holds',
      );
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    assert.equal(await replays('feeder'), before.feeder + 2, 'a 422 or a 409 is no replay');
    const crm = await app.postUsers(users, { token: TOKENS.crm, headers: keyed(key) });
    assert.equal(
      crm.status,
      200,
      `its users stored already, written as new under crm's own key: ${crm.text}`,
    );
    assert.equal(crm.headers.get('idempotent-replayed'), null);
    assert.equal(await replays('crm'), before.crm, "another client's key is its own");
  });

  test('keys are per client: the same key of another client is another key', async () => {
    const key = `client-${uniqueTag()}`;
    const a = await app.postUsers(makeUsers(2), { token: TOKENS.feeder, headers: keyed(key) });
    const b = await app.postUsers(makeUsers(3), { token: TOKENS.crm, headers: keyed(key) });
    assert.equal(a.status, 201, a.text);
    assert.equal(b.status, 201, b.text);
    assert.equal(b.headers.get('idempotent-replayed'), null);
    const rows = await db.pool.query(
      'SELECT client FROM idempotency_keys WHERE key = $1 ORDER BY client',
      [key],
    );
    assert.deepEqual(
      rows.rows.map((r) => r.client),
      ['token:crm', 'token:feeder'],
    );
  });

  test('a malformed key: 400 malformed_idempotency_key, nothing read or written', async () => {
    const count = await db.countUsers();
    for (const value of [
      'abc',
      '""',
      `"${'k'.repeat(256)}"`,
      '"a\tb"',
      '"a", "b"',
      '"a\\b"',
      '"unterminated',
      '"a" trailing',
      '"é"',
    ]) {
      const res = await app
        .postUsers(makeUsers(1), { token: TOKENS.feeder, headers: { 'idempotency-key': value } })
        .catch((err) => ({ status: 0, text: String(err), body: undefined }));
      if (res.status === 0) continue; // a value fetch itself refuses to send (not a byte string)
      assert.equal(res.status, 400, `${JSON.stringify(value)}: ${res.text}`);
      assert.equal(res.body.error, 'malformed_idempotency_key', value);
    }
    for (const value of [
      `"${'k'.repeat(255)}"`,
      '"a\\"b\\\\c"',
      ' "spaced" ',
      '"with-params";a=1;b="x"',
    ]) {
      const res = await post(makeUsers(1), { 'idempotency-key': value });
      assert.equal(res.status, 201, `${JSON.stringify(value)}: ${res.text}`);
    }
    assert.equal(await db.countUsers(), count + 4);
    assert.equal((await keyRow('a"b\\c')).length, 1, 'escapes decoded');
  });

  test('the same key at once: one write; every other answer the first replayed or 409', async () => {
    const key = `race-${uniqueTag()}`;
    const users = makeUsers(2500); // three chunks: a transaction that takes a while
    const answers = await Promise.all(Array.from({ length: 6 }, () => post(users, keyed(key))));
    const written = answers.filter(
      (a) => a.headers.get('idempotent-replayed') === null && a.status < 300,
    );
    assert.equal(
      written.length,
      1,
      answers.map((a) => `${a.status} ${a.headers.get('idempotent-replayed')}`).join(', '),
    );
    assert.equal(written[0].body.inserted, 2500);
    for (const a of answers) {
      if (a === written[0]) continue;
      if (a.status === 409) assert.equal(a.body.error, 'idempotency_key_in_flight');
      else assert.deepEqual(asSent(a), asSent(written[0]));
    }
    assert.equal((await db.usersByEmail(users.map((u) => u.email))).size, 2500);
  });

  test('a retry while the first attempt waits on a row: it waits too, then gets the first answer', async () => {
    const key = `wait-${uniqueTag()}`;
    const users = makeUsers(150); // over GROUP_COMMIT_SMALL_ROWS: written on its own, waiting DB_LOCK_TIMEOUT_MS
    const holder = new pg.Client(db.url);
    await holder.connect();
    const waiting = async () =>
      (await holder.query('SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted')).rows[0].n;
    try {
      // Another writer's uncommitted insert of one of its emails holds the first attempt.
      await holder.query('BEGIN');
      await holder.query("INSERT INTO users (email, name) VALUES ($1, 'held')", [users[75].email]);
      const first = post(users, keyed(key));
      await waitUntil(
        async () => (await waiting()) === 1,
        'the first attempt to wait for the row',
        within(1000),
        10,
      );
      const second = post(users, keyed(key));
      await waitUntil(
        async () => (await waiting()) === 2,
        'the retry to wait for the key',
        within(1000),
        10,
      );
      await holder.query('ROLLBACK');
      const [a, b] = await Promise.all([first, second]);
      assert.equal(a.status, 201, a.text);
      assert.equal(a.body.inserted, 150);
      assert.equal(a.headers.get('idempotent-replayed'), null);
      assert.deepEqual(asSent(b), asSent(a));
      assert.equal(b.headers.get('idempotent-replayed'), 'true');
    } finally {
      await holder.end();
    }
  });

  test('a key another transaction holds past the lock timeout: 409 with Retry-After, nothing written', async () => {
    const key = `inflight-${uniqueTag()}`;
    const users = makeUsers(2);
    const holder = new pg.Client(db.url);
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(
        "INSERT INTO idempotency_keys (client, key, expires_at) VALUES ('token:feeder', $1, now() + interval '1 hour')",
        [key],
      );
      for (const [label, res] of [
        ['a small request (group commit)', await post(users, keyed(key))],
        ['a batch', await post(makeUsers(500), keyed(key))],
        ['a stream', await post(ndjson(users), keyed(key), NDJSON)],
      ]) {
        assert.equal(res.status, 409, `${label}: ${res.text}`);
        assert.equal(res.body.error, 'idempotency_key_in_flight', label);
        assert.equal(res.headers.get('retry-after'), '1', label);
      }
      assert.equal((await db.usersByEmail(users.map((u) => u.email))).size, 0);
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    const after = await post(users, keyed(key));
    assert.equal(after.status, 201, `once the holder is gone, the key is free: ${after.text}`);
  });

  test('group commit: concurrent small keyed requests each keep their own key and answer', async () => {
    const tag = uniqueTag();
    const requests = Array.from({ length: 24 }, (_, i) => ({
      key: `group-${tag}-${i}`,
      users: makeUsers(1 + (i % 3), `${tag}-${i}`),
      prefer: i % 4 === 0 ? 'return=representation' : i % 4 === 1 ? 'count=exact' : undefined,
    }));
    const send = () =>
      Promise.all(
        requests.map((r) => post(r.users, keyed(r.key, r.prefer ? { prefer: r.prefer } : {}))),
      );
    // Some keyless requests among them share the groups.
    const [firsts] = await Promise.all([
      send(),
      Promise.all(Array.from({ length: 8 }, () => post(makeUsers(1), {}))),
    ]);
    firsts.forEach((res, i) => {
      const n = requests[i].users.length;
      assert.equal(res.status, 201, res.text);
      if (requests[i].prefer === 'return=representation')
        assert.deepEqual(
          res.body.map((/** @type {any} */ u) => u.email),
          requests[i].users.map((u) => u.email),
        );
      else
        assert.deepEqual(
          res.body,
          { received: n, inserted: n, updated: 0, duplicates: 0 },
          requests[i].key,
        );
      if (requests[i].prefer === 'count=exact')
        assert.equal(res.headers.get('content-range'), `*/${n}`);
    });
    const agains = await send();
    agains.forEach((res, i) => {
      assert.deepEqual(asSent(res), asSent(firsts[i]), requests[i].key);
      assert.equal(res.headers.get('idempotent-replayed'), 'true');
    });
    const { rows } = await db.pool.query(
      'SELECT count(*)::int AS n FROM idempotency_keys WHERE key LIKE $1',
      [`group-${tag}-%`],
    );
    assert.equal(rows[0].n, 24);
  });

  test('one key with three bodies at once (a group, or the next): one writes, the others 409 or 422', async () => {
    const key = `group-reuse-${uniqueTag()}`;
    const answers = await Promise.all([
      post(makeUsers(1), keyed(key)),
      post(makeUsers(1), keyed(key)),
      post(makeUsers(1), keyed(key)),
    ]);
    const statuses = answers.map((a) => a.status).sort();
    assert.equal(
      statuses.filter((s) => s === 201).length,
      1,
      answers.map((a) => a.text).join(' | '),
    );
    for (const a of answers.filter((x) => x.status !== 201))
      assert.ok(
        ['idempotency_key_reused', 'idempotency_key_in_flight'].includes(a.body.error),
        a.text,
      );
  });

  test('after a restart (another app on the same database): the retry gets the first answer', async () => {
    const key = `restart-${uniqueTag()}`;
    const users = makeUsers(20);
    const first = await post(users, keyed(key, { prefer: 'return=representation' }));
    assert.equal(first.status, 201);
    const other = await startTestApp({ databaseUrl: db.url, env });
    try {
      const again = await other.postUsers(users, {
        token: TOKENS.feeder,
        headers: keyed(key, { prefer: 'return=representation' }),
      });
      assert.deepEqual(asSent(again), asSent(first));
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
    } finally {
      await other.close();
    }
  });

  test('without the header nothing is stored and nothing changes', async () => {
    const {
      rows: [{ n: keysBefore }],
    } = await db.pool.query('SELECT count(*)::int AS n FROM idempotency_keys');
    const users = makeUsers(5);
    const res = await post(users, {});
    assert.deepEqual(res.body, { received: 5, inserted: 5, updated: 0, duplicates: 0 });
    assert.equal((await post(ndjson(makeUsers(3)), {}, NDJSON)).status, 201);
    const {
      rows: [{ n: keysAfter }],
    } = await db.pool.query('SELECT count(*)::int AS n FROM idempotency_keys');
    assert.equal(keysAfter, keysBefore);
  });

  test("npm run import sends a key per run; a run again with --idempotency-key gets the first run's answer", async () => {
    const script = fileURLToPath(new URL('../../../scripts/import.js', import.meta.url));
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-import-key-'));
    try {
      const file = path.join(dir, 'users.ndjson');
      await writeFile(file, ndjson(makeUsers(300).map(({ email, name }) => ({ email, name }))));
      const run = (/** @type {string[]} */ args) =>
        promisify(execFile)(process.execPath, [
          script,
          file,
          '--url',
          app.baseUrl,
          '--token',
          TOKENS.crm,
          ...args,
        ]);
      const key = `import-${uniqueTag()}`;
      const first = JSON.parse((await run(['--idempotency-key', key])).stdout);
      assert.deepEqual(
        { ...first, seconds: 0 },
        { received: 300, inserted: 300, updated: 0, duplicates: 0, seconds: 0 },
      );
      const again = JSON.parse((await run(['--idempotency-key', key])).stdout);
      assert.deepEqual({ ...again, seconds: 0 }, { ...first, replayed: true, seconds: 0 });
      const fresh = JSON.parse((await run([])).stdout);
      assert.equal(
        fresh.inserted,
        0,
        'a run without the option is a new key: written again, idempotent by email',
      );
      assert.equal(fresh.replayed, undefined);
      const { rows } = await db.pool.query(
        "SELECT count(*)::int AS n FROM idempotency_keys WHERE client = 'token:crm' AND key ~ '^[0-9a-f-]{36}$'",
      );
      assert.equal(rows[0].n, 1, 'its own key, a UUID');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('the log names no key body, email or token', () => {
    const log = JSON.stringify(app.logs);
    assert.ok(!log.includes('@example.com'), 'no email in the log');
    for (const token of Object.values(TOKENS))
      assert.ok(!log.includes(token), 'no token in the log');
    assert.deepEqual(
      app.logs.filter((l) => l.level >= 50),
      [],
      'nothing logged as an error',
    );
  });
});

describe('Idempotency-Key scopes: a static token and a JWT of one name are two clients', () => {
  const jwtSecret = `idempotency-scope-${'s'.repeat(32)}`;
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
  /** @type {string} */ let aliceJwt;
  const ALICE_TOKEN = 'alice-token-0123456789abcdef';
  before(async () => {
    db = await createTestDatabase();
    app = await startTestApp({
      databaseUrl: db.url,
      env: { INGEST_TOKENS: JSON.stringify({ alice: ALICE_TOKEN }), JWT_SECRET: jwtSecret },
    });
    aliceJwt = await new SignJWT({ role: 'writer', sub: 'alice' })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('10m')
      .sign(new TextEncoder().encode(jwtSecret));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  test("the same key under each: each its own first answer (no replay of the other's, no 422), each replayed its own", async () => {
    const tag = uniqueTag();
    const shared = makeUsers(3);
    const same = `scope-same-${tag}`;
    const byToken = await app.postUsers(shared, { token: ALICE_TOKEN, headers: keyed(same) });
    assert.equal(byToken.status, 201, byToken.text);
    const byJwt = await app.postUsers(shared, { token: aliceJwt, headers: keyed(same) });
    assert.equal(
      byJwt.status,
      200,
      `the token's users stored already: the JWT's own answer, not the token's replayed: ${byJwt.text}`,
    );
    assert.deepEqual(byJwt.body, { received: 3, inserted: 0, updated: 0, duplicates: 3 });
    assert.equal(byJwt.headers.get('idempotent-replayed'), null);

    const other = `scope-other-${tag}`;
    const tokenUsers = makeUsers(2);
    const jwtUsers = makeUsers(4);
    const first = await app.postUsers(tokenUsers, { token: ALICE_TOKEN, headers: keyed(other) });
    const second = await app.postUsers(jwtUsers, { token: aliceJwt, headers: keyed(other) });
    assert.equal(first.status, 201, first.text);
    assert.equal(
      second.status,
      201,
      `another body under the same key, of another client: written, not 422: ${second.text}`,
    );
    assert.equal(second.body.inserted, 4);

    for (const [token, users, firstAnswer] of /** @type {const} */ ([
      [ALICE_TOKEN, tokenUsers, first],
      [aliceJwt, jwtUsers, second],
      [aliceJwt, shared, byJwt],
    ])) {
      const key = firstAnswer === byJwt ? same : other;
      const again = await app.postUsers(users, { token, headers: keyed(key) });
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(
        asSent(again),
        asSent(firstAnswer),
        'each client replayed its own first answer',
      );
    }
    const { rows } = await db.pool.query(
      'SELECT client, key FROM idempotency_keys WHERE key = ANY($1) ORDER BY key, client',
      [[same, other]],
    );
    assert.deepEqual(
      rows.map((r) => `${r.client} ${r.key}`),
      [`jwt:alice ${other}`, `token:alice ${other}`, `jwt:alice ${same}`, `token:alice ${same}`],
    );
    assert.equal(await db.countUsers(), 9);
  });

  test('the log names no JWT, token or email', () => {
    const log = JSON.stringify(app.logs);
    for (const secret of [ALICE_TOKEN, aliceJwt, jwtSecret, '@example.com'])
      assert.ok(!log.includes(secret), 'no secret in the log');
  });
});

describe('Idempotency-Key expiry', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
  before(async () => {
    db = await createTestDatabase();
    app = await startTestApp({ databaseUrl: db.url, env: { IDEMPOTENCY_KEY_TTL_SECONDS: '1' } });
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  test('an expired key is purged in the background, and is a new key again', async () => {
    const key = `expiry-${uniqueTag()}`;
    const users = makeUsers(2);
    const first = await app.postUsers(users, { headers: keyed(key) });
    assert.equal(first.status, 201);
    const { rows } = await db.pool.query(
      "SELECT expires_at - now() < interval '2 seconds' AS soon FROM idempotency_keys WHERE key = $1",
      [key],
    );
    assert.deepEqual(rows, [{ soon: true }], 'kept IDEMPOTENCY_KEY_TTL_SECONDS');
    await waitUntil(
      async () => (await db.pool.query('SELECT 1 FROM idempotency_keys')).rowCount === 0,
      'the purge to delete the expired key',
      within(10_000),
      100,
    );
    const again = await app.postUsers(makeUsers(1), { headers: keyed(key) });
    assert.equal(again.status, 201, 'another body under an expired key: a new request');
    assert.equal(again.headers.get('idempotent-replayed'), null);
  });

  test('an expired key not yet purged is claimed again as a new key', async () => {
    const key = `expired-${uniqueTag()}`;
    await db.pool.query(
      "INSERT INTO idempotency_keys (client, key, expires_at, fingerprint, status, headers, body) VALUES ('anonymous', $1, now() - interval '1 second', '\\x00', 201, '{}', 'old')",
      [key],
    );
    const res = await app.postUsers(makeUsers(1), { headers: keyed(key) });
    assert.equal(res.status, 201, res.text);
    assert.notEqual(res.text, 'old');
  });
});

describe('the purge of expired Idempotency-Keys, against PostgreSQL', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let testDb;
  /** @type {import('../../src/db/database.js').Database} */ let db;
  const store = createKeyStore({ ttlSeconds: 3600 });
  before(async () => {
    testDb = await createTestDatabase();
    db = createDatabase(
      {
        databaseUrl: testDb.url,
        dbPoolMax: 2,
        dbConnectTimeoutMs: 2000,
        dbStatementTimeoutMs: 10_000,
      },
      pino({ level: 'silent' }),
    );
  });
  after(async () => {
    await db?.close();
    await testDb?.drop();
  });

  /** Stores answered keys of `client` expiring at now() + `inSeconds` (negative: expired). @param {string} client @param {string[]} keys @param {number} inSeconds */
  const stored = (client, keys, inSeconds) =>
    testDb.pool.query(
      `INSERT INTO idempotency_keys (client, key, expires_at, fingerprint, status, headers, body)
       SELECT $1, k, now() + make_interval(secs => $3), '\\x00', 201, '{}', 'stored' FROM unnest($2::text[]) AS k`,
      [client, keys, inSeconds],
    );
  /** The keys of `client` left, sorted. @param {string} client */
  const keysLeft = async (client) =>
    (
      await testDb.pool.query('SELECT key FROM idempotency_keys WHERE client = $1 ORDER BY key', [
        client,
      ])
    ).rows.map((r) => r.key);

  test('expired keys are deleted in batches, oldest first; live ones, however soon they expire, are kept', async () => {
    const client = `purge-${uniqueTag()}`;
    await stored(client, ['gone-a', 'gone-b'], -3600);
    await stored(client, ['gone-c'], -1);
    await stored(client, ['live-soon'], 5);
    await stored(client, ['live-hour'], 3600);
    await stored(client, ['live-week'], 7 * 86_400);
    assert.equal(await purgeExpiredKeys(db, 2), 2);
    assert.deepEqual(await keysLeft(client), ['gone-c', 'live-hour', 'live-soon', 'live-week']);
    assert.equal(await purgeExpiredKeys(db, 2), 1);
    assert.equal(await purgeExpiredKeys(db), 0);
    assert.deepEqual(await keysLeft(client), ['live-hour', 'live-soon', 'live-week']);
  });

  test('a key claimed by a request in flight (new, or expired and taken again) is not deleted, during the claim nor after it', async () => {
    const client = `claimed-${uniqueTag()}`;
    await stored(client, ['taken-again'], -60);
    const writer = new pg.Client({ connectionString: testDb.url });
    await writer.connect();
    try {
      await writer.query('BEGIN');
      const claim = await writer.query(
        store.claim([
          { client, key: 'new' },
          { client, key: 'taken-again' },
        ]),
      );
      assert.equal(claim.rowCount, 2, 'both claimed');
      // The expired row the claim holds is skipped, not waited for: the purge ends at once.
      const started = performance.now();
      assert.equal(await purgeExpiredKeys(db), 0);
      assert.ok(performance.now() - started < within(2000), 'not waited for');
      await writer.query(
        `UPDATE idempotency_keys SET fingerprint = '\\x00', status = 201, headers = '{}', body = 'answered' WHERE client = $1`,
        [client],
      );
      assert.equal(await purgeExpiredKeys(db), 0);
      await writer.query('COMMIT');
    } finally {
      await writer.end();
    }
    // Committed, both keys live for their TTL: a purge now keeps them too.
    assert.equal(await purgeExpiredKeys(db), 0);
    assert.deepEqual(await keysLeft(client), ['new', 'taken-again']);
  });
});

describe('Idempotency-Key through a transaction pooler (PgBouncer, pool_mode = transaction)', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startPgBouncer>>} */ let pooler;
  /** @type {Awaited<ReturnType<typeof startTestApp>>[]} */ const replicas = [];
  before(async () => {
    db = await createTestDatabase();
    pooler = await startPgBouncer({ upstreamUrl: db.url, poolSize: 3 });
    // Two replicas behind one pooler, as the issue tried it.
    for (let i = 0; i < 2; i++) replicas.push(await startTestApp({ databaseUrl: pooler.url }));
  });
  after(async () => {
    for (const app of replicas) await app.close();
    await pooler?.stop();
    await db?.drop();
  });

  test('every kind of write, keyed, replayed by the other replica byte for byte', async () => {
    const tag = uniqueTag();
    const cases = [
      { label: 'group commit', body: makeUsers(1), headers: {} },
      { label: 'a batch in one statement', body: makeUsers(500), headers: {} },
      { label: 'a batch in three', body: makeUsers(2500), headers: {} },
      {
        label: 'a representation in merge mode',
        body: makeUsers(50),
        headers: { prefer: 'return=representation, resolution=merge-duplicates' },
      },
      {
        label: 'NDJSON',
        body: ndjson(makeUsers(300).map(({ email, name }) => ({ email, name }))),
        headers: {},
        type: NDJSON,
      },
      {
        label: 'CSV in merge mode',
        body: csv(makeUsers(300).map(({ email, name }) => ({ email, name }))),
        headers: { prefer: 'resolution=merge-duplicates' },
        type: CSV,
      },
    ];
    for (const [i, c] of cases.entries()) {
      const headers = keyed(`pooler-${tag}-${i}`, c.headers);
      const first = await replicas[0].postUsers(c.body, { headers, contentType: c.type });
      assert.equal(first.status, 201, `${c.label}: ${first.text}`);
      const again = await replicas[1].postUsers(c.body, { headers, contentType: c.type });
      assert.deepEqual(asSent(again), asSent(first), c.label);
      assert.equal(again.headers.get('idempotent-replayed'), 'true', c.label);
    }
  });
});
