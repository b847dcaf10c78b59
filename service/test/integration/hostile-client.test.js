// A client with a valid credential sends what it should not: a JWT whose client claim holds a NUL
// or a lone surrogate, on a keyed and a quarantining write; secrets in the URL's query. Each is
// checked three ways: the answers (and how long), the tables afterwards, the log.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { SignJWT } from 'jose';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { makeUsers } from '../../../test/support/users.js';

const ANSWER_WITHIN_MS = 2_000;

describe('a hostile client with a valid credential', () => {
  const secret = `hs256-${randomBytes(24).toString('hex')}`;
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
  before(async () => {
    db = await createTestDatabase();
    app = await startTestApp({
      databaseUrl: db.url,
      env: { JWT_SECRET: secret, LOG_LEVEL: 'debug', GROUP_COMMIT: 'off' },
    });
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  /** @param {string} sub */
  const jwtFor = (sub) =>
    new SignJWT({ role: 'writer', sub })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(secret));

  /** @param {string} table */
  const rowsOf = async (table) =>
    (await db.pool.query(`SELECT count(*)::int AS n FROM ${table}`)).rows[0].n;

  test('a client claim with a NUL or a lone surrogate: 401 at once on a keyed or quarantining write; /readyz stays 200; nothing stored; never logged', async () => {
    const users = makeUsers(3);
    const items = [...users, { email: 'not-an-email', name: 'x' }];
    for (const sub of ['a\u0000b', 'lone\ud800', 'tab\tname']) {
      const token = await jwtFor(sub);
      for (const [headers, body] of [
        [{ 'idempotency-key': `"k-${randomBytes(4).toString('hex')}"` }, users],
        [{ prefer: 'invalid=quarantine' }, items],
        [
          {
            'idempotency-key': `"q-${randomBytes(4).toString('hex')}"`,
            prefer: 'invalid=quarantine',
          },
          items,
        ],
      ]) {
        const started = performance.now();
        const res = await app.postUsers(body, { token, headers });
        const tookMs = performance.now() - started;
        assert.equal(
          res.status,
          401,
          `${JSON.stringify(sub)} ${JSON.stringify(headers)}: ${res.text}`,
        );
        assert.equal(res.body.error, 'unauthorized');
        assert.match(res.headers.get('www-authenticate') ?? '', /invalid_token/);
        assert.match(res.body.message, /sub claim is not a client name/);
        assert.ok(!res.text.includes(sub) && !res.text.includes(JSON.stringify(sub).slice(1, -1)));
        assert.ok(tookMs < ANSWER_WITHIN_MS, `answered in ${Math.round(tookMs)} ms`);
      }
      const ready = await fetch(`${app.baseUrl}/readyz`);
      assert.equal(ready.status, 200, 'one request cannot take the instance out of service');
    }
    assert.equal(await db.countUsers(), 0);
    assert.equal(await rowsOf('idempotency_keys'), 0);
    assert.equal(await rowsOf('quarantined_items'), 0);

    // The same writes with a plain claim reach the database: the claim alone was refused.
    const good = await app.postUsers(items, {
      token: await jwtFor('crm import'),
      headers: { 'idempotency-key': '"good-1"', prefer: 'invalid=quarantine' },
    });
    assert.equal(good.status, 201, good.text);
    assert.equal(await db.countUsers(), 3);
    assert.equal(await rowsOf('idempotency_keys'), 1);
    assert.equal(await rowsOf('quarantined_items'), 1);

    const logged = app.logs.map((l) => JSON.stringify(l)).join('\n');
    for (const never of ['\\u0000', 'a\u0000b', '\\ud800', 'tab\\tname', '@example.com', secret])
      assert.ok(!logged.includes(never), `the log holds ${JSON.stringify(never)}`);
    const refusals = app.logs.filter((l) => l.authRefusal === 'claim');
    assert.equal(refusals.length, 9, 'each refusal logged, by its reason');
    assert.equal(app.logs.filter((l) => l.level >= 50).length, 0, 'no error logged');
  });

  test('a token, a key and an email in the query string: the log holds their names only', async () => {
    const token = await jwtFor('crm');
    const users = makeUsers(2);
    const before = await db.countUsers();
    const query = `apikey=sk_live_123&token=${token}&email=eq.ada%40example.com&ada%40example.com`;
    const written = await fetch(`${app.baseUrl}/users?${query}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(users),
    });
    assert.equal(written.status, 201, await written.text());
    const refused = await fetch(
      `${app.baseUrl}/users?apikey=sk_live_123&email=eq.ada@example.com`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '[]',
      },
    );
    assert.equal(refused.status, 401);
    assert.equal((await fetch(`${app.baseUrl}/nowhere?token=${token}`)).status, 404);
    assert.equal(await db.countUsers(), before + 2);

    const urls = app.logs.filter((l) => l.req?.url).map((l) => l.req.url);
    assert.ok(urls.includes('/users?apikey&token&email&*'), urls.join(' '));
    assert.ok(urls.includes('/users?apikey&email'), urls.join(' '));
    assert.ok(urls.includes('/nowhere?token'), urls.join(' '));
    const logged = app.logs.map((l) => JSON.stringify(l)).join('\n');
    for (const never of ['sk_live_123', token, 'ada%40example.com', 'ada@example.com', 'eq.'])
      assert.ok(!logged.includes(never), `the log holds ${never.slice(0, 20)}`);
  });
});
