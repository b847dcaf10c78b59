import assert from 'node:assert/strict';
import http from 'node:http';
import { afterEach, describe, mock, test } from 'node:test';
import { SignJWT, generateKeyPair } from 'jose';
import {
  CLOCK_TOLERANCE_S,
  JwtRefusal,
  VERIFIED_CACHE_MS,
  createJwtVerifier,
} from '../../src/auth/jwt.js';

const SECRET = 'a-test-secret-of-at-least-32-characters!';
const KEY = new TextEncoder().encode(SECRET);

/** @type {import('../../src/auth/jwt.js').JwtConfig} */
const BASE = {
  secret: SECRET,
  jwksUrl: undefined,
  audience: undefined,
  issuer: undefined,
  roleClaim: 'role',
  roles: undefined,
  clientClaim: 'sub',
  jwksTimeoutMs: 1000,
};

/** @param {Record<string, unknown>} claims @param {number} exp seconds since the epoch @param {{ key?: any, alg?: string, kid?: string }} [o] */
const token = (claims, exp, { key = KEY, alg = 'HS256', kid } = {}) =>
  new SignJWT({ role: 'writer', sub: 'crm-import', ...claims })
    .setProtectedHeader({ alg, ...(kid ? { kid } : {}) })
    .setExpirationTime(exp)
    .sign(key);

/** @param {Promise<unknown>} verified @param {string} reason */
const refused = (verified, reason) =>
  assert.rejects(verified, (err) => err instanceof JwtRefusal && err.reason === reason);

afterEach(() => mock.timers.reset());

/** The verifier, resolving with the client it names alone. */
const clientOf =
  (/** @type {(t: string) => Promise<{ client: string | undefined }>} */ verify) =>
  async (/** @type {string} */ t) =>
    (await verify(t)).client;

describe('the verified-token cache and the key set host (unit)', () => {
  test('a remembered token is refused once it expires, though the cache would still keep it', async (t) => {
    // Date only: jose and the cache both read the clock through it.
    mock.timers.enable({ apis: ['Date'], now: Date.UTC(2030, 0, 1) });
    const verify = clientOf(await createJwtVerifier(BASE));
    const exp = Math.floor(Date.now() / 1000) + 10;
    const good = await token({}, exp);
    assert.equal(await verify(good), 'crm-import');
    const signature = t.mock.method(crypto.subtle, 'verify');
    mock.timers.tick((10 + CLOCK_TOLERANCE_S) * 1000 - 1);
    assert.equal(
      await verify(good),
      'crm-import',
      'within exp and the clock tolerance: from the cache',
    );
    assert.equal(signature.mock.callCount(), 0);
    mock.timers.tick(1);
    assert.ok(
      (10 + CLOCK_TOLERANCE_S) * 1000 < VERIFIED_CACHE_MS,
      'the cache alone would keep it longer',
    );
    await refused(verify(good), 'expired');
  });

  test('a remembered token is verified again after VERIFIED_CACHE_MS', async (t) => {
    mock.timers.enable({ apis: ['Date'], now: Date.UTC(2030, 0, 1) });
    const verify = clientOf(await createJwtVerifier(BASE));
    const good = await token({}, Math.floor(Date.now() / 1000) + 3600);
    await verify(good);
    const signature = t.mock.method(crypto.subtle, 'verify');
    mock.timers.tick(VERIFIED_CACHE_MS - 1);
    await verify(good);
    assert.equal(signature.mock.callCount(), 0);
    mock.timers.tick(1);
    assert.equal(await verify(good), 'crm-import');
    assert.equal(signature.mock.callCount(), 1, 'verified again');
  });

  test('the cache is bounded: past 1000 tokens it is emptied, and the first is verified again', async (t) => {
    const verify = clientOf(await createJwtVerifier(BASE));
    const exp = Math.floor(Date.now() / 1000) + 3600;
    const tokens = await Promise.all(
      Array.from({ length: 1001 }, (_, i) => token({ sub: `client-${i}` }, exp)),
    );
    for (const tk of tokens.slice(0, 1000)) await verify(tk);
    const signature = t.mock.method(crypto.subtle, 'verify');
    assert.equal(await verify(tokens[0]), 'client-0');
    assert.equal(signature.mock.callCount(), 0, '1000 remembered');
    assert.equal(await verify(tokens[1000]), 'client-1000');
    assert.equal(signature.mock.callCount(), 1);
    assert.equal(await verify(tokens[0]), 'client-0');
    assert.equal(signature.mock.callCount(), 2, 'the 1001st emptied the cache');
  });

  test('a refused role is never remembered: anon, then a missing role, refused every time', async () => {
    const verify = clientOf(await createJwtVerifier(BASE));
    const exp = Math.floor(Date.now() / 1000) + 3600;
    const anon = await token({ role: 'anon' }, exp);
    const none = await token({ role: undefined }, exp);
    for (let i = 0; i < 2; i++) {
      await refused(verify(anon), 'role');
      await refused(verify(none), 'role');
    }
    await refused(verify(await token({ role: 7 }, exp)), 'role');
  });

  test("a client's name is cut to 256 characters", async () => {
    const verify = clientOf(await createJwtVerifier(BASE));
    const exp = Math.floor(Date.now() / 1000) + 3600;
    assert.equal(await verify(await token({ sub: 'x'.repeat(300) }, exp)), 'x'.repeat(256));
    assert.equal(await verify(await token({ sub: 'y'.repeat(256) }, exp)), 'y'.repeat(256));
  });

  for (const [name, answer] of /** @type {const} */ ([
    [
      'answers 500',
      (/** @type {http.ServerResponse} */ res) =>
        res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"boom"}'),
    ],
    [
      'answers what is not JSON',
      (/** @type {http.ServerResponse} */ res) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end('<html>gateway</html>'),
    ],
    [
      'answers JSON that is no key set',
      (/** @type {http.ServerResponse} */ res) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"keys":"none"}'),
    ],
  ])) {
    test(`a key set host that ${name}: the token is refused as jwks_unavailable (401), not an error`, async (t) => {
      let asked = 0;
      const server = http.createServer((_req, res) => {
        asked++;
        answer(res);
      });
      await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
      t.after(() => server.close());
      const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
      const verify = clientOf(
        await createJwtVerifier({
          ...BASE,
          secret: undefined,
          jwksUrl: `http://127.0.0.1:${port}/jwks`,
        }),
      );
      const { privateKey } = await generateKeyPair('ES256');
      await refused(
        verify(
          await token({}, Math.floor(Date.now() / 1000) + 3600, {
            alg: 'ES256',
            key: privateKey,
            kid: 'k',
          }),
        ),
        'jwks_unavailable',
      );
      assert.equal(asked, 1);
    });
  }
});
