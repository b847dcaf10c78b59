import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, test } from 'node:test';
import { SignJWT, UnsecuredJWT, base64url, exportJWK, generateKeyPair } from 'jose';
import { JwtRefusal, createJwtVerifier } from '../../src/auth/jwt.js';

const SECRET = 'a-test-secret-of-at-least-32-characters!';
const KEY = new TextEncoder().encode(SECRET);
const now = () => Math.floor(Date.now() / 1000);

/** @type {import('../../src/auth/jwt.js').JwtConfig} */
const BASE = {
  secret: SECRET,
  jwksUrl: undefined,
  audience: 'sluice',
  issuer: 'https://auth.example',
  roleClaim: 'role',
  roles: undefined,
  clientClaim: 'sub',
  jwksTimeoutMs: 1000,
};

/**
 * A signed token, good unless told otherwise.
 * @param {Record<string, unknown>} [claims] @param {{ key?: any, alg?: string, kid?: string, exp?: number, nbf?: number }} [options]
 */
function token(claims = {}, { key = KEY, alg = 'HS256', kid, exp = now() + 3600, nbf } = {}) {
  const jwt = new SignJWT({ role: 'writer', sub: 'crm-import', ...claims })
    .setProtectedHeader({ alg, ...(kid ? { kid } : {}) })
    .setAudience('sluice')
    .setIssuer('https://auth.example')
    .setIssuedAt()
    .setExpirationTime(exp);
  if (nbf !== undefined) jwt.setNotBefore(nbf);
  return jwt.sign(key);
}

/** @param {Promise<unknown>} verified @param {string} reason */
const refused = (verified, reason) =>
  assert.rejects(
    verified,
    (err) => err instanceof JwtRefusal && err.reason === reason && !err.message.includes(SECRET),
  );

/** The verifier, resolving with the client it names alone. */
const clientOf =
  (/** @type {(t: string) => Promise<{ client: string | undefined }>} */ verify) =>
  async (/** @type {string} */ t) =>
    (await verify(t)).client;

describe('JWT verification (unit)', () => {
  test('a good token: its sub is the client, and it is verified once, then remembered', async (t) => {
    const verify = clientOf(await createJwtVerifier(BASE));
    const good = await token();
    assert.equal(await verify(good), 'crm-import');
    const sign = t.mock.method(crypto.subtle, 'verify');
    assert.equal(await verify(good), 'crm-import');
    assert.equal(sign.mock.callCount(), 0, 'the second time, no signature checked');
    assert.equal(
      await verify(await token({ sub: undefined })),
      undefined,
      'no sub: no name (the request is still accepted)',
    );
  });

  test('expired (past the clock tolerance), not yet valid, another audience, another issuer, a wrong signature: each refused, saying why', async () => {
    const verify = clientOf(await createJwtVerifier(BASE));
    await refused(verify(await token({}, { exp: now() - 60 })), 'expired');
    assert.equal(
      await verify(await token({}, { exp: now() - 2 })),
      'crm-import',
      'within the 5 s tolerance',
    );
    await refused(verify(await token({}, { nbf: now() + 60 })), 'not_yet_valid');
    await refused(
      verify(
        await new SignJWT({ role: 'writer' })
          .setProtectedHeader({ alg: 'HS256' })
          .setAudience('another')
          .setIssuer('https://auth.example')
          .sign(KEY),
      ),
      'audience',
    );
    await refused(
      verify(
        await new SignJWT({ role: 'writer' })
          .setProtectedHeader({ alg: 'HS256' })
          .setAudience('sluice')
          .setIssuer('https://evil.example')
          .sign(KEY),
      ),
      'issuer',
    );
    await refused(
      verify(await token({}, { key: new TextEncoder().encode(`${SECRET}-but-another`) })),
      'signature',
    );
    const good = await token();
    const [header, payload] = good.split('.');
    const forged = `${header}.${base64url.encode(JSON.stringify({ ...JSON.parse(new TextDecoder().decode(base64url.decode(payload))), role: 'admin' }))}.${good.split('.')[2]}`;
    await refused(verify(forged), 'signature');
  });

  test('no aud or no iss when they are required: refused saying the claim is missing, not that it is another', async () => {
    const verify = clientOf(await createJwtVerifier(BASE));
    /** @param {Promise<unknown>} verified @param {string} reason @param {string} message */
    const refusedWith = (verified, reason, message) =>
      assert.rejects(
        verified,
        (err) => err instanceof JwtRefusal && err.reason === reason && err.message === message,
      );
    await refusedWith(
      verify(
        await new SignJWT({ role: 'writer' })
          .setProtectedHeader({ alg: 'HS256' })
          .setIssuer('https://auth.example')
          .sign(KEY),
      ),
      'audience',
      'the token has no audience (aud)',
    );
    await refusedWith(
      verify(
        await new SignJWT({ role: 'writer' })
          .setProtectedHeader({ alg: 'HS256' })
          .setAudience('sluice')
          .sign(KEY),
      ),
      'issuer',
      'the token has no issuer (iss)',
    );
    await refusedWith(
      verify(
        await new SignJWT({ role: 'writer' })
          .setProtectedHeader({ alg: 'HS256' })
          .setAudience('another')
          .setIssuer('https://auth.example')
          .sign(KEY),
      ),
      'audience',
      'the token is for another audience',
    );
  });

  test('alg none, an algorithm other than HS256 for a secret: refused', async () => {
    const verify = clientOf(await createJwtVerifier(BASE));
    const none = new UnsecuredJWT({ role: 'writer', sub: 'x' })
      .setAudience('sluice')
      .setIssuer('https://auth.example')
      .setExpirationTime('1h')
      .encode();
    await refused(verify(none), 'algorithm');
    await refused(
      verify(await token({}, { alg: 'HS512', key: new TextEncoder().encode(SECRET.repeat(2)) })),
      'algorithm',
    );
    const { privateKey } = await generateKeyPair('ES256');
    await refused(verify(await token({}, { alg: 'ES256', key: privateKey })), 'algorithm');
  });

  test('JWT_ERASE_ROLES: a token whose role is one of them may erase, remembered with it; any other role, or none listed, may not', async (t) => {
    const verify = await createJwtVerifier({ ...BASE, eraseRoles: ['ops', 'service_role'] });
    const ops = await token({ role: 'ops', sub: 'dpo' });
    assert.deepEqual(await verify(ops), { client: 'dpo', mayErase: true });
    const sign = t.mock.method(crypto.subtle, 'verify');
    assert.deepEqual(await verify(ops), { client: 'dpo', mayErase: true }, 'from the cache');
    assert.equal(sign.mock.callCount(), 0);
    assert.deepEqual(await verify(await token()), { client: 'crm-import', mayErase: false });
    assert.equal((await verify(await token({ role: 'Ops' }))).mayErase, false, 'exact, as roles');
    const none = await createJwtVerifier(BASE);
    assert.equal((await none(await token({ role: 'ops' }))).mayErase, false);
    const renamed = await createJwtVerifier({
      ...BASE,
      roleClaim: 'sluice_role',
      eraseRoles: ['ops'],
    });
    assert.equal((await renamed(await token({ sluice_role: 'ops', role: 'x' }))).mayErase, true);
    assert.equal((await renamed(await token({ sluice_role: 'w', role: 'ops' }))).mayErase, false);
  });

  test('the role claim: missing, empty or anon refused; JWT_ROLES restricts; JWT_ROLE_CLAIM and JWT_CLIENT_CLAIM rename', async () => {
    const verify = clientOf(await createJwtVerifier(BASE));
    await refused(verify(await token({ role: undefined })), 'role');
    await refused(verify(await token({ role: '' })), 'role');
    await refused(verify(await token({ role: 'anon' })), 'role');
    await refused(verify(await token({ role: ['writer'] })), 'role');
    const restricted = clientOf(
      await createJwtVerifier({ ...BASE, roles: ['service_role', 'ingest'] }),
    );
    await refused(restricted(await token({ role: 'authenticated' })), 'role');
    assert.equal(await restricted(await token({ role: 'ingest' })), 'crm-import');
    const renamed = clientOf(
      await createJwtVerifier({
        ...BASE,
        roleClaim: 'sluice_role',
        clientClaim: 'client_id',
        audience: undefined,
        issuer: undefined,
      }),
    );
    await refused(renamed(await token()), 'role');
    assert.equal(
      await renamed(await token({ sluice_role: 'writer', client_id: 'billing' })),
      'billing',
    );
  });

  test('a client claim with a control character or a lone surrogate: refused (claim), never quoted; a long one cut, never inside a pair', async () => {
    const verify = clientOf(await createJwtVerifier(BASE));
    for (const sub of [
      'a\u0000b',
      'tab\there',
      'line\n',
      'del\u007f',
      'c1\u0085',
      'lone\ud800',
      'x\udc00y',
    ]) {
      await assert.rejects(
        verify(await token({ sub })),
        (err) =>
          err instanceof JwtRefusal &&
          err.reason === 'claim' &&
          /sub claim/.test(err.message) &&
          !err.message.includes(sub),
        JSON.stringify(sub),
      );
    }
    assert.equal(await verify(await token({ sub: 'Zoë 🙂 @ example' })), 'Zoë 🙂 @ example');
    const cut = await verify(await token({ sub: `${'a'.repeat(255)}🙂tail` }));
    assert.equal(cut, 'a'.repeat(255), 'the pair that straddles the limit left out whole');
    assert.equal(await verify(await token({ sub: 'b'.repeat(300) })), 'b'.repeat(256));
  });

  test('a JWKS: an asymmetric key by kid; an unknown kid refused; an HMAC token refused; the key set fetched again only after its cooldown', async (t) => {
    const known = await generateKeyPair('RS256');
    const unknown = await generateKeyPair('RS256');
    let fetches = 0;
    const server = http.createServer(async (_req, res) => {
      fetches++;
      res.setHeader('content-type', 'application/json');
      res.end(
        JSON.stringify({
          keys: [{ ...(await exportJWK(known.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }],
        }),
      );
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
    t.after(() => server.close());
    const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
    const verify = clientOf(
      await createJwtVerifier({
        ...BASE,
        secret: undefined,
        jwksUrl: `http://127.0.0.1:${port}/.well-known/jwks.json`,
      }),
    );

    assert.equal(
      await verify(await token({}, { alg: 'RS256', key: known.privateKey, kid: 'k1' })),
      'crm-import',
    );
    await refused(
      verify(await token({}, { alg: 'RS256', key: unknown.privateKey, kid: 'k2' })),
      'unknown_key',
    );
    await refused(
      verify(await token({}, { alg: 'RS256', key: unknown.privateKey, kid: 'k1' })),
      'signature',
    );
    await refused(verify(await token({}, { alg: 'HS256', kid: 'k1' })), 'algorithm');
    await refused(
      verify(await token({}, { alg: 'RS256', key: unknown.privateKey, kid: 'k3' })),
      'unknown_key',
    );
    assert.equal(fetches, 1, 'an unknown kid within the cooldown fetches nothing');
  });

  test('a key set host that does not answer: refused within JWT_JWKS_TIMEOUT_MS', async (t) => {
    const server = http.createServer(() => {});
    await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
    t.after(() => {
      server.closeAllConnections();
      server.close();
    });
    const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
    const verify = clientOf(
      await createJwtVerifier({
        ...BASE,
        secret: undefined,
        jwksUrl: `http://127.0.0.1:${port}/jwks`,
        jwksTimeoutMs: 300,
      }),
    );
    const { privateKey } = await generateKeyPair('ES256');
    const started = performance.now();
    await refused(
      verify(await token({}, { alg: 'ES256', key: privateKey, kid: 'k' })),
      'jwks_unavailable',
    );
    assert.ok(
      performance.now() - started < 1500,
      `took ${Math.round(performance.now() - started)} ms`,
    );
  });
});
