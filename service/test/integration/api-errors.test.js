import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { API_ERRORS } from '../../src/errors.js';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { responseChecker } from '../../../test/support/openapi-check.js';
import { startPgBouncer } from '../../../test/support/pgbouncer.js';
import { postHead, rawExchange } from '../../../test/support/raw-http.js';
import { makeUsers } from '../../../test/support/users.js';

const TOKEN = 'api-errors-test-token-0123456789';
const ERASURE_KEY = 'an erasure key of forty characters, test!';

/**
 * Every code of the error catalogue, reached over HTTP by the request that gets it, and each
 * answer checked against the service's own /openapi.json: an answer the document does not
 * describe fails here, and so does a catalogue code no request can reach.
 */
describe('every refusal in the catalogue, over HTTP, as the OpenAPI document describes it', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let unmigrated;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let broken;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let unreachable;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let tight;
  /** @type {ReturnType<typeof responseChecker>} */ let check;
  /** @type {Set<string>} */ const reached = new Set();

  before(async () => {
    db = await createTestDatabase();
    unmigrated = await createTestDatabase({ migrated: false });
    const env = {
      INGEST_TOKEN: TOKEN,
      MAX_BATCH_ITEMS: '3',
      MAX_BODY_BYTES: '4096',
      BODY_READ_TIMEOUT_MS: '300',
    };
    app = await startTestApp({
      databaseUrl: db.url,
      env,
      serverTimeouts: { headersTimeoutMs: 300, checkEveryMs: 100 },
    });
    // The smallest in-flight budget, refusing at once rather than letting a request wait.
    tight = await startTestApp({
      databaseUrl: db.url,
      env: {
        INGEST_TOKEN: TOKEN,
        ADMISSION_BUDGET_BYTES: String(64 * 1024),
        ADMISSION_WAIT_MS: '0',
      },
    });
    // No users table: the statement fails for a reason of its own, which retrying will not fix.
    broken = await startTestApp({ databaseUrl: unmigrated.url, env: { INGEST_TOKEN: TOKEN } });
    // Port 1 on loopback: nothing listens, the connection is refused at once.
    unreachable = await startTestApp({
      databaseUrl: 'postgres://sluice@127.0.0.1:1/none',
      env: { INGEST_TOKEN: TOKEN, DB_CONNECT_TIMEOUT_MS: '500' },
    });
    check = responseChecker(await (await fetch(`${app.baseUrl}/openapi.json`)).json());
  });
  after(async () => {
    await Promise.all([app?.close(), broken?.close(), unreachable?.close(), tight?.close()]);
    await Promise.all([db?.drop(), unmigrated?.drop()]);
  });

  /**
   * @param {string} code @param {string} method @param {string} path
   * @param {{ status: number, headers: Headers | Record<string, string>, body: any }} res
   */
  function expectCode(code, method, path, res) {
    assert.equal(res.body?.error, code, JSON.stringify(res.body));
    assert.equal(res.status, API_ERRORS[/** @type {keyof typeof API_ERRORS} */ (code)].status);
    check(method, path, res);
    reached.add(code);
  }

  /** @param {unknown} body @param {Record<string, string>} [headers] @param {Awaited<ReturnType<typeof startTestApp>>} [target] */
  const post = (body, headers = {}, target = app) =>
    target.postUsers(body, { token: TOKEN, headers });
  /** @param {(socket: net.Socket) => void | Promise<void>} send @param {Awaited<ReturnType<typeof startTestApp>>} [target] */
  const raw = (send, target = app) => rawExchange(target.baseUrl, send);
  const auth = /** @type {[string, string]} */ (['Authorization', `Bearer ${TOKEN}`]);

  test('400s: the batch, the JSON, the bytes, the keys, the headers, the preference', async () => {
    expectCode('invalid_batch', 'post', '/users', await post([{ email: 'x', name: 'X' }]));
    expectCode('not_an_array', 'post', '/users', await post({ email: 'a@b.co', name: 'A' }));
    const empty = await post([]);
    expectCode('empty_batch', 'post', '/users', empty);
    assert.equal(
      empty.body.message,
      'the array is empty: send 1 to 3 users',
      'names the configured MAX_BATCH_ITEMS',
    );
    expectCode('malformed_json', 'post', '/users', await post('[{"email": '));
    expectCode(
      'invalid_batch',
      'post',
      '/users',
      await app.postUsers('{"email":"x","name":"X"}\n', {
        token: TOKEN,
        contentType: 'application/x-ndjson',
      }),
    );
    expectCode(
      'malformed_csv',
      'post',
      '/users',
      await app.postUsers('email,name,nickname\n', { token: TOKEN, contentType: 'text/csv' }),
    );
    expectCode(
      'invalid_utf8',
      'post',
      '/users',
      await post(new Uint8Array([0x5b, 0x22, 0xff, 0x22, 0x5d])),
    );
    expectCode('duplicate_key', 'post', '/users', await post('{"a": 1, "a": 2}'));
    expectCode(
      'malformed_encoding',
      'post',
      '/users',
      await post(new Uint8Array([1, 2, 3, 4]), { 'content-encoding': 'gzip' }),
    );
    expectCode(
      'unsupported_preference',
      'post',
      '/users',
      await post(makeUsers(1), { prefer: 'resolution=overwrite' }),
    );
    /** @param {string} query */
    const postTo = (query) =>
      fetch(`${app.baseUrl}/users?${query}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify(makeUsers(1)),
      }).then(async (res) => ({
        status: res.status,
        headers: res.headers,
        body: await res.json(),
      }));
    expectCode('unknown_column', 'post', '/users', await postTo('columns=email,nickname'));
    expectCode('unsupported_conflict_target', 'post', '/users', await postTo('on_conflict=phone'));
    expectCode('unsupported_query', 'post', '/users', await postTo('select=email,orders(id)'));
    const twoTypes = await raw((s) => {
      s.end(
        postHead([
          auth,
          ['Content-Type', 'application/json'],
          ['Content-Type', 'text/plain'],
          ['Content-Length', 2],
          ['Connection', 'close'],
        ]) + '[]',
      );
    });
    expectCode('duplicate_header', 'post', '/users', twoTypes);
  });

  test('400 bad_request: what Node cannot parse, answered in JSON, on any route', async () => {
    const both = await raw((s) => {
      s.end(
        postHead([
          auth,
          ['Content-Type', 'application/json'],
          ['Content-Length', 2],
          ['Transfer-Encoding', 'chunked'],
        ]) + '0\r\n\r\n',
      );
    });
    expectCode('bad_request', 'post', '/users', both);
    const garbled = await raw((s) => {
      s.end('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header Line\r\n\r\n');
    });
    expectCode('bad_request', 'get', '/healthz', garbled);
  });

  /**
   * A request with the token, JSON the body when there is one.
   * @param {Awaited<ReturnType<typeof startTestApp>>} target @param {string} method
   * @param {string} path @param {unknown} [body]
   */
  const send = async (target, method, path, body) => {
    const res = await fetch(`${target.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${TOKEN}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
  };

  test('403: a client whose credentials grant writing, not erasing (forbidden), on both routes that erase', async () => {
    const writer = await startTestApp({
      databaseUrl: db.url,
      env: { INGEST_TOKENS: JSON.stringify({ crm: TOKEN }), ERASURE_KEY },
    });
    try {
      const [a] = makeUsers(1);
      const refused = await send(writer, 'DELETE', `/users?email=eq.${a.email}`);
      expectCode('forbidden', 'delete', '/users', refused);
      assert.equal(refused.body.code, '42501');
      expectCode('forbidden', 'post', '/erasures', await send(writer, 'POST', '/erasures', [a]));
    } finally {
      await writer.close();
    }
  });

  test('400s of a DELETE (missing_filter, unsupported_filter); 503 without ERASURE_KEY (erasure_key_missing)', async () => {
    const [a] = makeUsers(1);
    assert.equal((await post([a])).status, 201);
    expectCode('missing_filter', 'delete', '/users', await send(app, 'DELETE', '/users'));
    for (const query of ['name=eq.x', `email=like.${a.email}`, 'email=eq.not-an-email'])
      expectCode(
        'unsupported_filter',
        'delete',
        '/users',
        await send(app, 'DELETE', `/users?${query}`),
      );
    // The app has no ERASURE_KEY: it cannot make a tombstone, so it erases nothing.
    const keyless = await send(app, 'DELETE', `/users?email=eq.${a.email}`);
    expectCode('erasure_key_missing', 'delete', '/users', keyless);
    assert.equal(keyless.headers.get('retry-after'), '2');
    const bulk = await send(app, 'POST', '/erasures', [{ email: a.email }]);
    expectCode('erasure_key_missing', 'post', '/erasures', bulk);
    const stored = await db.pool.query('SELECT count(*)::int AS n FROM users WHERE email = $1', [
      a.email,
    ]);
    assert.equal(stored.rows[0].n, 1, 'nothing erased');
  });

  test('503: an erasure made while a merge-mode stream was read, in a process that knew of none (erasure_during_import)', async (t) => {
    // A database of its own: the importer must begin knowing of no tombstone at all.
    const fresh = await createTestDatabase();
    const env = { INGEST_TOKEN: TOKEN, ERASURE_KEY };
    const importer = await startTestApp({ databaseUrl: fresh.url, env });
    const eraser = await startTestApp({ databaseUrl: fresh.url, env });
    const keyless = await startTestApp({ databaseUrl: fresh.url, env: { INGEST_TOKEN: TOKEN } });
    t.after(async () => {
      await Promise.all([importer.close(), eraser.close(), keyless.close()]);
      await fresh.drop();
    });
    const [a, b] = makeUsers(2);
    const line = (/** @type {object} */ user) => `${JSON.stringify(user)}\n`;
    const chunk = (/** @type {string} */ text) =>
      `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
    /** Merge mode stages the body, and touches users only once it has all of it. */
    const importing = async () => {
      const { rows } = await fresh.pool.query(
        `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND state = 'active' AND query LIKE 'COPY users_stream%'`,
      );
      return rows[0].n > 0;
    };
    const res = await raw(async (s) => {
      s.write(
        postHead([
          auth,
          ['Content-Type', 'application/x-ndjson'],
          ['Prefer', 'resolution=merge-duplicates'],
          ['Transfer-Encoding', 'chunked'],
          ['Connection', 'close'],
        ]) + chunk(line(a)),
      );
      for (let i = 0; i < 200 && !(await importing()); i++)
        await new Promise((r) => setTimeout(r, 25));
      assert.ok(await importing(), 'the import is under way');
      const erased = await send(eraser, 'POST', '/erasures', [{ email: a.email }]);
      assert.deepEqual(erased.body, { received: 1, erased: 0, absent: 1 });
      // Not end(): a client that half-closes mid-request is taken for one gone.
      s.write(chunk(line(b)) + chunk(''));
    }, importer);
    expectCode('erasure_during_import', 'post', '/users', res);
    assert.equal(res.headers['retry-after'], '1');
    assert.equal(await fresh.countUsers(), 0, 'nothing written');
    // Sent again, the same import leaves the erased email out.
    const again = await importer.postUsers(line(a) + line(b), {
      token: TOKEN,
      contentType: 'application/x-ndjson',
      headers: { prefer: 'resolution=merge-duplicates' },
    });
    check('post', '/users', again);
    assert.deepEqual(again.body, { received: 2, inserted: 1, updated: 0, stale: 1, duplicates: 0 });
    // A process without the key cannot tell an erased email from another: it writes nothing.
    const [c] = makeUsers(1);
    expectCode('erasure_key_missing', 'post', '/users', await post([c], {}, keyless));
    const stream = await keyless.postUsers(line(c), {
      token: TOKEN,
      contentType: 'application/x-ndjson',
    });
    expectCode('erasure_key_missing', 'post', '/users', stream);
  });

  test('401 (no credentials, a malformed Authorization, a token no client has), 404, 405', async () => {
    expectCode('unauthorized', 'post', '/users', await app.postUsers(makeUsers(1)));
    // The same code, RFC 6750's case in WWW-Authenticate (one of the values the document lists).
    const basic = await app.postUsers(makeUsers(1), {
      headers: { authorization: `Basic ${TOKEN}` },
    });
    expectCode('unauthorized', 'post', '/users', basic);
    assert.equal(basic.headers.get('www-authenticate'), 'Bearer error="invalid_request"');
    const wrong = await app.postUsers(makeUsers(1), { token: `${TOKEN}x` });
    expectCode('unauthorized', 'post', '/users', wrong);
    assert.equal(wrong.headers.get('www-authenticate'), 'Bearer error="invalid_token"');
    const res = await fetch(`${app.baseUrl}/no-such-route`);
    expectCode('not_found', 'get', '/no-such-route', {
      status: res.status,
      headers: res.headers,
      body: await res.json(),
    });
    const get = await fetch(`${app.baseUrl}/users`);
    expectCode('method_not_allowed', 'get', '/users', {
      status: get.status,
      headers: get.headers,
      body: await get.json(),
    });
    assert.equal(get.headers.get('allow'), 'POST, DELETE');
    for (const method of ['HEAD', 'PUT', 'PATCH', 'OPTIONS']) {
      const other = await fetch(`${app.baseUrl}/users`, {
        method,
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      assert.deepEqual([other.status, other.headers.get('allow')], [405, 'POST, DELETE'], method);
    }
  });

  test('408: a body, or headers, that do not arrive in time', async () => {
    const slowBody = await raw(async (s) => {
      s.write(
        postHead([auth, ['Content-Type', 'application/json'], ['Content-Length', 100]]) +
          '[{"email"',
      );
    });
    expectCode('body_timeout', 'post', '/users', slowBody);
    const slowHeaders = await raw(async (s) => {
      s.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n');
    });
    expectCode('request_timeout', 'get', '/healthz', slowHeaders);
  });

  test('413, 415, 417, 431, 501', async () => {
    expectCode('too_many_items', 'post', '/users', await post(makeUsers(4)));
    expectCode(
      'payload_too_large',
      'post',
      '/users',
      await post(JSON.stringify([{ email: 'big@example.com', name: 'x'.repeat(5000) }])),
    );
    expectCode(
      'payload_too_large',
      'post',
      '/users',
      await post(gzipSync(JSON.stringify([{ email: 'big@example.com', name: 'x'.repeat(5000) }])), {
        'content-encoding': 'gzip',
      }),
    );
    expectCode(
      'unsupported_media_type',
      'post',
      '/users',
      await app.postUsers('[]', { token: TOKEN, contentType: 'text/plain' }),
    );
    expectCode(
      'unsupported_charset',
      'post',
      '/users',
      await app.postUsers('[]', { token: TOKEN, contentType: 'application/json; charset=latin1' }),
    );
    expectCode(
      'unsupported_encoding',
      'post',
      '/users',
      await post('[]', { 'content-encoding': 'compress' }),
    );
    const expect = await raw((s) => {
      s.end(
        postHead([
          auth,
          ['Content-Type', 'application/json'],
          ['Content-Length', 2],
          ['Expect', 'the-unexpected'],
        ]) + '[]',
      );
    });
    expectCode('expectation_failed', 'post', '/users', expect);
    const huge = await raw((s) => {
      s.end(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    });
    expectCode('headers_too_large', 'get', '/healthz', huge);
    const transfer = await raw((s) => {
      s.end(
        postHead([
          auth,
          ['Content-Type', 'application/json'],
          ['Transfer-Encoding', 'gzip, chunked'],
          ['Connection', 'close'],
        ]) + '0\r\n\r\n',
      );
    });
    expectCode('unsupported_transfer_encoding', 'post', '/users', transfer);
  });

  test("500: a failure of the request's own, with its error id in the log", async () => {
    const res = await post(makeUsers(1), {}, broken);
    expectCode('internal', 'post', '/users', res);
    assert.ok(
      broken.logs.some((l) => l.errorId === res.body.errorId && l.msg === 'unexpected error'),
      'the error id is in the log',
    );
  });

  test('503: the in-flight budget full (overloaded), the database unreachable', async () => {
    // A request that declares a body over the large requests' share and sends none of it holds that
    // share while it waits for its body; the next large one cannot fit.
    const holder = net.connect(Number(new URL(tight.baseUrl).port), '127.0.0.1');
    await once(holder, 'connect');
    holder.write(
      postHead([auth, ['Content-Type', 'application/json'], ['Content-Length', 70_000]]),
    );
    try {
      /** @type {any} */ let refused;
      // The holder is admitted as soon as its headers are parsed; until then the next one may fit.
      for (let i = 0; i < 50 && refused?.body?.error !== 'overloaded'; i++) {
        refused = await tight.postUsers(JSON.stringify(makeUsers(3)).padEnd(8000, ' '), {
          token: TOKEN,
        });
      }
      expectCode('overloaded', 'post', '/users', refused);
      assert.equal(refused.headers.get('retry-after'), '1');
    } finally {
      holder.destroy();
    }
    const down = await post(makeUsers(1), {}, unreachable);
    expectCode('database_unavailable', 'post', '/users', down);
    assert.equal(down.headers.get('retry-after'), '2');
  });

  test('400, 409, 422: an Idempotency-Key malformed, in flight, used for another request', async () => {
    expectCode(
      'malformed_idempotency_key',
      'post',
      '/users',
      await post(makeUsers(1), { 'idempotency-key': 'not-quoted' }),
    );
    const key = `api-errors-${makeUsers(1)[0].email}`;
    const first = await post(makeUsers(1), { 'idempotency-key': `"${key}"` });
    assert.equal(first.status, 201, first.text);
    check('post', '/users', first);
    const replay = await post(makeUsers(1), { 'idempotency-key': `"${key}"` });
    expectCode('idempotency_key_reused', 'post', '/users', replay);
    const holder = new pg.Client(db.url);
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query(
        "INSERT INTO idempotency_keys (client, key, expires_at) VALUES ('token:default', 'held', now() + interval '1 minute')",
      );
      const inFlight = await post(makeUsers(1), { 'idempotency-key': '"held"' });
      expectCode('idempotency_key_in_flight', 'post', '/users', inFlight);
      assert.equal(inFlight.headers.get('retry-after'), '1');
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
  });

  test('429: a client over the rate declared with its token (rate_limited), before its body is read', async () => {
    const limited = await startTestApp({
      databaseUrl: db.url,
      env: { INGEST_TOKENS: JSON.stringify({ limited: { token: TOKEN, rate: 1, burst: 1 } }) },
    });
    try {
      assert.equal((await limited.postUsers(makeUsers(2), { token: TOKEN })).status, 201);
      const res = await limited.postUsers(makeUsers(2), { token: TOKEN });
      expectCode('rate_limited', 'post', '/users', res);
      assert.ok(Number(res.headers.get('retry-after')) >= 1);
    } finally {
      await limited.close();
    }
  });

  test('503: a row held by another writer past DB_LOCK_TIMEOUT_MS (lock_timeout), a statement past DB_STATEMENT_TIMEOUT_MS (statement_timeout)', async () => {
    const slow = await startTestApp({
      databaseUrl: db.url,
      env: {
        INGEST_TOKEN: TOKEN,
        DB_LOCK_TIMEOUT_MS: '200',
        DB_STATEMENT_TIMEOUT_MS: '500',
        ERASURE_KEY,
      },
    });
    const holder = new pg.Client(db.url);
    await holder.connect();
    try {
      const [locked] = makeUsers(1);
      await holder.query('BEGIN');
      await holder.query("INSERT INTO users (email, name) VALUES ($1, 'Holder')", [locked.email]);
      const res = await post([locked], {}, slow);
      expectCode('lock_timeout', 'post', '/users', res);
      assert.equal(res.headers.get('retry-after'), '1');
      // An erasure holds off every writer, so it waits for this one as long, then answers so.
      const erasing = await send(slow, 'DELETE', `/users?email=eq.${locked.email}`);
      expectCode('lock_timeout', 'delete', '/users', erasing);
      await holder.query('ROLLBACK');

      // A statement that runs past the limit: a trigger that sleeps for one name.
      await holder.query(`CREATE FUNCTION sleepy() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.name = 'Sleeper' THEN PERFORM pg_sleep(2); END IF; RETURN NEW; END $$;
        CREATE TRIGGER sleepy BEFORE INSERT ON users FOR EACH ROW EXECUTE FUNCTION sleepy()`);
      const timedOut = await post([{ ...makeUsers(1)[0], name: 'Sleeper' }], {}, slow);
      expectCode('statement_timeout', 'post', '/users', timedOut);
      assert.equal(timedOut.headers.get('retry-after'), '2');
    } finally {
      await holder
        .query('DROP TRIGGER IF EXISTS sleepy ON users; DROP FUNCTION IF EXISTS sleepy()')
        .catch(() => {});
      await holder.end();
      await slow.close();
    }
  });

  test('503: the connection lost after the write was sent (outcome_unknown)', async () => {
    const holder = new pg.Client(db.url);
    await holder.connect();
    try {
      // The statement sleeps in a trigger, and an operator ends its session meanwhile: the write was
      // sent, and its answer is PostgreSQL ending the session, which may come after a commit.
      await holder.query(`CREATE FUNCTION doomed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN IF NEW.name = 'Doomed' THEN PERFORM pg_sleep(5); END IF; RETURN NEW; END $$;
        CREATE TRIGGER doomed BEFORE INSERT ON users FOR EACH ROW EXECUTE FUNCTION doomed()`);
      let answered = false;
      const answer = post([{ ...makeUsers(1)[0], name: 'Doomed' }]).finally(() => {
        answered = true;
      });
      // Every attempt (a write that fails this way may be tried once more) is ended the same way.
      while (!answered) {
        await holder.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'sluice' AND wait_event = 'PgSleep'",
        );
        await new Promise((r) => setTimeout(r, 20));
      }
      const res = await answer;
      expectCode('outcome_unknown', 'post', '/users', res);
      assert.equal(res.headers.get('retry-after'), '2');
      assert.equal(res.body.code, '08007');
    } finally {
      await holder
        .query('DROP TRIGGER IF EXISTS doomed ON users; DROP FUNCTION IF EXISTS doomed()')
        .catch(() => {});
      await holder.end();
    }
  });

  test('500: a pooler in statement mode refused the transaction (statement_pooling), not to be retried', async () => {
    const pooler = await startPgBouncer({ upstreamUrl: db.url, poolMode: 'statement' });
    const behind = await startTestApp({
      databaseUrl: pooler.url,
      env: { INGEST_TOKEN: TOKEN, INSERT_STRATEGY: 'copy', GROUP_COMMIT: 'off' },
    });
    try {
      const res = await post(makeUsers(1), {}, behind);
      expectCode('statement_pooling', 'post', '/users', res);
      assert.equal(res.headers.get('retry-after'), null);
      assert.equal(res.body.code, '08P01');
    } finally {
      await behind.close();
      await pooler.stop();
    }
  });

  test('every code of the catalogue was reached above', () => {
    assert.deepEqual([...reached].sort(), Object.keys(API_ERRORS).sort());
  });
});
