import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { SignJWT, UnsecuredJWT, exportJWK, generateKeyPair } from 'jose';
import { createTestDatabase } from '../../../test/support/database.js';
import { startServerProcess } from '../../../test/support/server-process.js';
import { within } from '../../../test/support/time-factor.js';
import { makeUsers } from '../../../test/support/users.js';
import { waitUntil } from '../../../test/support/wait.js';

const AUDIENCE = 'sluice';
const ISSUER = 'https://auth.sluice.test';
/** Every refusal, the hanging key host's included, is answered within this (the issue's bound). */
const REFUSAL_BOUND_MS = 5000;

/** A JSON Web Key Set on 127.0.0.1, counting its fetches; `hang`: accepts and never answers. */
async function startKeyHost(
  /** @type {{ keys?: object[], hang?: boolean }} */ { keys = [], hang = false },
) {
  let fetches = 0;
  const server = http.createServer((_req, res) => {
    fetches++;
    if (hang) return;
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys }));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${port}/.well-known/jwks.json`,
    fetches: () => fetches,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  };
}

/**
 * Bearer JWTs and static tokens against the real service (node service/src/server.js) at
 * LOG_LEVEL=debug: JWKS from a key host on 127.0.0.1, one that hangs, and an HS256 secret; every
 * refusal a 401 within 5 s with its RFC 6750 header; a good token stores; the client's name in the
 * log and the metric; no token or key material in any log line.
 */
describe('authentication over HTTP: static tokens, JWTs from a JWKS or a secret', () => {
  const feederToken = `feeder-${randomBytes(16).toString('hex')}`;
  const crmToken = `crm-${randomBytes(16).toString('hex')}`;
  const jwtSecret = `hs256-${randomBytes(24).toString('hex')}`;
  /** Everything that must never be logged. @type {Set<string>} */
  const secrets = new Set([feederToken, crmToken, jwtSecret]);
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startKeyHost>>} */ let keyHost;
  /** @type {Awaited<ReturnType<typeof startKeyHost>>} */ let hangingHost;
  /** @type {Record<'jwks' | 'hanging' | 'hs256', Awaited<ReturnType<typeof startServerProcess>>>} */ const services =
    /** @type {any} */ ({});
  /** @type {Awaited<ReturnType<typeof generateKeyPair>>} */ let signing;
  /** @type {Awaited<ReturnType<typeof generateKeyPair>>} */ let stranger;

  before(async () => {
    db = await createTestDatabase();
    signing = await generateKeyPair('RS256', { extractable: true });
    stranger = await generateKeyPair('RS256', { extractable: true });
    for (const pair of [signing, stranger]) {
      const jwk = await exportJWK(pair.privateKey);
      for (const part of ['d', 'p', 'q', 'dp', 'dq', 'qi'])
        secrets.add(/** @type {string} */ (/** @type {any} */ (jwk)[part]));
    }
    keyHost = await startKeyHost({
      keys: [{ ...(await exportJWK(signing.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }],
    });
    hangingHost = await startKeyHost({ hang: true });
    const common = { DATABASE_URL: db.url, LOG_LEVEL: 'debug' };
    services.jwks = await startServerProcess({
      ...common,
      JWT_JWKS_URL: keyHost.url,
      JWT_AUDIENCE: AUDIENCE,
      JWT_ISSUER: ISSUER,
      INGEST_TOKENS: JSON.stringify({ feeder: feederToken, crm: crmToken }),
    });
    services.hanging = await startServerProcess({ ...common, JWT_JWKS_URL: hangingHost.url });
    services.hs256 = await startServerProcess({
      ...common,
      JWT_SECRET: jwtSecret,
      JWT_ROLES: 'service_role',
    });
  });
  after(async () => {
    for (const s of Object.values(services)) await s?.stop();
    await keyHost?.close();
    await hangingHost?.close();
    await db?.drop();
  });

  /**
   * A JWT for the JWKS service, good unless told otherwise; kept among the secrets.
   * @param {{ claims?: Record<string, unknown>, key?: any, kid?: string, alg?: string, exp?: number, aud?: string }} [options]
   */
  async function jwt({
    claims = {},
    key = signing.privateKey,
    kid = 'k1',
    alg = 'RS256',
    exp = Math.floor(Date.now() / 1000) + 600,
    aud = AUDIENCE,
  } = {}) {
    const token = await new SignJWT({ role: 'authenticated', sub: 'crm-sync', ...claims })
      .setProtectedHeader({ alg, kid })
      .setAudience(aud)
      .setIssuer(ISSUER)
      .setIssuedAt()
      .setExpirationTime(exp)
      .sign(key);
    secrets.add(token);
    secrets.add(token.split('.')[2]);
    return token;
  }

  /**
   * POST /users with `authorization` (none when undefined), timed.
   * @param {'jwks' | 'hanging' | 'hs256'} service @param {string | undefined} authorization @param {Record<string, string>} [headers]
   */
  async function post(service, authorization, headers = {}) {
    const users = makeUsers(1);
    const started = performance.now();
    const res = await fetch(`${services[service].baseUrl}/users`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(authorization === undefined ? {} : { authorization }),
        ...headers,
      },
      body: JSON.stringify(users),
    });
    const body = await res.json();
    const ms = performance.now() - started;
    const stored = (await db.usersByEmail(users.map((u) => u.email))).size;
    return {
      status: res.status,
      body,
      wwwAuthenticate: res.headers.get('www-authenticate'),
      ms,
      stored,
    };
  }

  /** @param {Awaited<ReturnType<typeof post>>} res @param {string} message */
  function assertInvalidToken(res, message) {
    assert.equal(res.status, 401, message);
    assert.equal(res.body.error, 'unauthorized', message);
    assert.equal(res.wwwAuthenticate, 'Bearer error="invalid_token"', message);
    assert.ok(res.ms < REFUSAL_BOUND_MS, `${message}: answered in ${Math.round(res.ms)} ms`);
    assert.equal(res.stored, 0, `${message}: nothing written`);
  }

  test("a good JWT from the key set stores, with supabase-js's apikey header beside it (ignored); its sub is logged, jwt is the label", async () => {
    const token = await jwt();
    const anonKey = await jwt({ claims: { role: 'anon', sub: undefined } });
    const res = await post('jwks', `Bearer ${token}`, { apikey: anonKey });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.equal(res.stored, 1);
    const line = await services.jwks.waitForLog(
      (l) => l.msg === 'request completed' && l.res?.statusCode === 201,
    );
    assert.equal(line.client, 'crm-sync');
    assert.equal(
      (await post('jwks', `Bearer ${token}`)).status,
      201,
      'the same token again (remembered, not verified again)',
    );
    assertInvalidToken(
      await post('jwks', `Bearer ${anonKey}`),
      'the anon key as the bearer: its role does not grant writing',
    );
  });

  test('static tokens beside JWTs: each client by its name in the log and the metric', async () => {
    for (const [token, client] of [
      [feederToken, 'feeder'],
      [crmToken, 'crm'],
    ]) {
      const from = services.jwks.logs.length;
      const res = await post('jwks', `Bearer ${token}`);
      assert.equal(res.status, 201);
      const line = await services.jwks.waitForLog(
        (l) => l.msg === 'request completed' && l.res?.statusCode === 201,
        { from },
      );
      assert.equal(line.client, client);
    }
    const metrics = await (await fetch(`${services.jwks.baseUrl}/metrics`)).text();
    assert.match(metrics, /^sluice_auth_accepted_total\{client="feeder"\} 1$/m);
    assert.match(metrics, /^sluice_auth_accepted_total\{client="crm"\} 1$/m);
    assert.match(metrics, /^sluice_auth_accepted_total\{client="jwt"\} [1-9]/m);
    assert.doesNotMatch(metrics, /crm-sync/, 'a sub is never a label');
  });

  test('expired, another audience, a wrong signature, alg none, an unknown kid, no role claim: each 401 invalid_token within 5 s, nothing written', async () => {
    const now = Math.floor(Date.now() / 1000);
    assertInvalidToken(await post('jwks', `Bearer ${await jwt({ exp: now - 60 })}`), 'expired');
    assertInvalidToken(
      await post('jwks', `Bearer ${await jwt({ aud: 'another-api' })}`),
      'another audience',
    );
    assertInvalidToken(
      await post('jwks', `Bearer ${await jwt({ key: stranger.privateKey })}`),
      'a wrong signature',
    );
    const none = new UnsecuredJWT({ role: 'authenticated', sub: 'x' })
      .setAudience(AUDIENCE)
      .setIssuer(ISSUER)
      .setExpirationTime('10m')
      .encode();
    assertInvalidToken(await post('jwks', `Bearer ${none}`), 'alg none');
    const fetchesBefore = keyHost.fetches();
    assertInvalidToken(
      await post('jwks', `Bearer ${await jwt({ key: stranger.privateKey, kid: 'k-unknown' })}`),
      'an unknown kid',
    );
    assert.ok(
      keyHost.fetches() - fetchesBefore <= 1,
      'an unknown kid fetches the key set at most once (then its cooldown)',
    );
    assertInvalidToken(
      await post('jwks', `Bearer ${await jwt({ key: stranger.privateKey, kid: 'k-unknown-2' })}`),
      'another unknown kid, within the cooldown',
    );
    assertInvalidToken(
      await post('jwks', `Bearer ${await jwt({ claims: { role: undefined } })}`),
      'no role claim',
    );
    const expired = await post('jwks', `Bearer ${await jwt({ exp: now - 60 })}`);
    assert.equal(
      expired.body.message,
      'the token has expired',
      'the message says why, and names nothing secret',
    );
    assert.equal(expired.body.code, 'PGRST301');
  });

  test('no credentials: 401 with WWW-Authenticate: Bearer and no error; a malformed header: invalid_request', async () => {
    const none = await post('jwks', undefined);
    assert.deepEqual(
      [none.status, none.body.error, none.wwwAuthenticate, none.stored],
      [401, 'unauthorized', 'Bearer', 0],
    );
    const basic = await post('jwks', `Basic ${Buffer.from(`x:${feederToken}`).toString('base64')}`);
    assert.deepEqual(
      [basic.status, basic.body.error, basic.wwwAuthenticate, basic.stored],
      [401, 'unauthorized', 'Bearer error="invalid_request"', 0],
    );
  });

  test('each 401 says why in its access-log line, as the metric does, never with the credential', async () => {
    const cases = [
      [undefined, 'missing'],
      ['Basic dXNlcjpwYXNz', 'malformed'],
      [`Bearer not-${feederToken}`, 'unknown_token'],
      [`Bearer ${await jwt({ aud: 'another' })}`, 'audience'],
    ];
    for (const [authorization, reason] of cases) {
      const from = services.jwks.logs.length;
      assert.equal((await post('jwks', authorization)).status, 401, reason);
      const line = await services.jwks.waitForLog(
        (l) => l.msg === 'request completed' && l.res?.statusCode === 401,
        { from },
      );
      assert.equal(line.authRefusal, reason, JSON.stringify(line));
      assert.equal(line.client, undefined, 'a refused request has no client');
    }
  });

  test('a key host that accepts and never answers: 401 within 5 s (JWT_JWKS_TIMEOUT_MS), every time', async () => {
    for (let i = 0; i < 2; i++) {
      const res = await post('hanging', `Bearer ${await jwt()}`);
      assertInvalidToken(res, `a hanging key host, request ${i + 1}`);
      assert.ok(res.ms >= 1500, `waited for the key set (${Math.round(res.ms)} ms)`);
    }
    const metrics = await (await fetch(`${services.hanging.baseUrl}/metrics`)).text();
    assert.match(metrics, /^sluice_auth_refused_total\{reason="jwks_unavailable"\} 2$/m);
  });

  test('HS256 with JWT_SECRET, JWT_ROLES=service_role: the role granted stores; another role, an RS256 token, another secret: 401', async () => {
    const key = new TextEncoder().encode(jwtSecret);
    /** @param {Record<string, unknown>} claims @param {Uint8Array} [k] */
    const hs = async (claims, k = key) => {
      const token = await new SignJWT({ sub: 'billing', ...claims })
        .setProtectedHeader({ alg: 'HS256' })
        .setExpirationTime('5m')
        .sign(k);
      secrets.add(token);
      return token;
    };
    assert.equal((await post('hs256', `Bearer ${await hs({ role: 'service_role' })}`)).status, 201);
    assertInvalidToken(
      await post('hs256', `Bearer ${await hs({ role: 'authenticated' })}`),
      'a role JWT_ROLES does not list',
    );
    assertInvalidToken(
      await post('hs256', `Bearer ${await jwt({ claims: { role: 'service_role' } })}`),
      'RS256 where HS256 is expected',
    );
    assertInvalidToken(
      await post(
        'hs256',
        `Bearer ${await hs({ role: 'service_role' }, new TextEncoder().encode(`${jwtSecret}-other`))}`,
      ),
      'another secret',
    );
  });

  test('a token file that cannot be read, or duplicate tokens: the service does not start, and names the variable, never a token', () => {
    const server = new URL('../../src/server.js', import.meta.url).pathname;
    for (const [env, variable] of /** @type {[Record<string, string>, string][]} */ ([
      [{ INGEST_TOKENS_FILE: '/nonexistent/sluice-tokens.json' }, 'INGEST_TOKENS_FILE'],
      [
        { INGEST_TOKENS_FILE: '/nonexistent/sluice-tokens.json', WORKERS: '2' },
        'INGEST_TOKENS_FILE',
      ],
      [{ INGEST_TOKENS: JSON.stringify({ a: feederToken, b: feederToken }) }, 'INGEST_TOKENS'],
    ])) {
      const r = spawnSync(process.execPath, [server], {
        env: { ...process.env, DATABASE_URL: db.url, HOST: '127.0.0.1', PORT: '0', ...env },
        encoding: 'utf8',
        timeout: 20_000,
      });
      const out = `${r.stdout}${r.stderr}`;
      assert.equal(r.status, 1, out);
      assert.match(out, new RegExp(`bad configuration: ${variable} `));
      assert.ok(!out.includes(feederToken), 'no token in the message');
    }
  });

  test('no token, no secret, no key material in any log line at debug level', () => {
    assert.ok(
      services.jwks.logs.some((l) => l.level === 20),
      'debug logging was on',
    );
    for (const [name, s] of Object.entries(services)) {
      const lines = s.logs.map((l) => JSON.stringify(l));
      for (const secret of secrets) {
        const leak = lines.find(
          (line) => line.includes(secret) || line.includes(secret.slice(0, 24)),
        );
        assert.equal(leak, undefined, `${name}: a secret in the log: ${leak}`);
      }
    }
  });
});

describe('a token rotated on a running service: INGEST_TOKENS_FILE rewritten', () => {
  const oldToken = `feeder-old-${randomBytes(16).toString('hex')}`;
  const newToken = `feeder-new-${randomBytes(16).toString('hex')}`;
  const REFRESH_MS = 200;
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startServerProcess>>} */ let service;
  /** @type {string} */ let dir;
  /** @type {string} */ let file;

  before(async () => {
    db = await createTestDatabase();
    dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-rotation-'));
    file = path.join(dir, 'tokens.json');
    await writeFile(file, JSON.stringify({ feeder: oldToken }));
    service = await startServerProcess({
      DATABASE_URL: db.url,
      LOG_LEVEL: 'debug',
      INGEST_TOKENS_FILE: file,
      INGEST_TOKENS_REFRESH_MS: String(REFRESH_MS),
    });
  });
  after(async () => {
    await service?.stop();
    await rm(dir, { recursive: true, force: true });
    await db?.drop();
  });

  /** POST /users with a bearer token. @param {string} token @param {unknown} body */
  async function post(token, body) {
    const res = await fetch(`${service.baseUrl}/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    });
    await res.arrayBuffer();
    return { status: res.status, wwwAuthenticate: res.headers.get('www-authenticate') };
  }

  test('the old token is refused and the new one taken once the file is read again; nothing written under the old; no token logged', async () => {
    assert.equal((await post(oldToken, makeUsers(1))).status, 201);
    assert.equal((await post(newToken, [])).status, 401, 'the new token not yet known');

    // Written as a rotation tool does: a new file renamed over the old one.
    await writeFile(`${file}.new`, JSON.stringify({ feeder: newToken }));
    await rename(`${file}.new`, file);
    const rotated = performance.now();
    // An empty batch writes nothing either way: 400 once let in, 401 while refused.
    await waitUntil(
      async () => (await post(newToken, [])).status === 400,
      'the new token taken',
      within(REFRESH_MS + 5000),
      20,
    );
    assert.ok(performance.now() - rotated < within(REFRESH_MS + 1000), 'within a refresh');

    const refused = makeUsers(2);
    const old = await post(oldToken, refused);
    assert.equal(old.status, 401);
    assert.equal(old.wwwAuthenticate, 'Bearer error="invalid_token"');
    assert.equal((await db.usersByEmail(refused.map((u) => u.email))).size, 0);
    const taken = makeUsers(2);
    assert.equal((await post(newToken, taken)).status, 201);
    assert.equal((await db.usersByEmail(taken.map((u) => u.email))).size, 2);

    const log = service.logs.map((l) => JSON.stringify(l)).join('\n');
    assert.ok(
      service.logs.filter((l) => l.msg === 'bearer tokens read').length >= 2,
      'the tokens read at start and again after the rewrite',
    );
    for (const token of [oldToken, newToken])
      assert.ok(!log.includes(token) && !log.includes(token.slice(0, 24)), 'no token logged');
  });
});
