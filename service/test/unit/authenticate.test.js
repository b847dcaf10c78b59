import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { JwtRefusal } from '../../src/auth/refusals.js';
import { TokenSet } from '../../src/auth/token-set.js';
import { ApiError, UnauthorizedError } from '../../src/errors.js';
import { JWT_LABEL, authenticate, jwtScope, tokenScope } from '../../src/http/authenticate.js';
import { ANONYMOUS_CLIENT } from '../../src/http/fair-share.js';

const JWT = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln';

/**
 * The middleware over one request; resolves with what it passed to next, the request and the metrics.
 * @param {Partial<Parameters<typeof authenticate>[0]>} deps @param {string[]} rawHeaders
 */
async function run(deps, rawHeaders) {
  /** @type {{ accepted: string[], refused: string[] }} */
  const counted = { accepted: [], refused: [] };
  const metrics = {
    accepted: (/** @type {string} */ c) => void counted.accepted.push(c),
    refused: (/** @type {string} */ r) => void counted.refused.push(r),
  };
  /** @type {Record<string, string>} */
  const headers = {};
  for (let i = 0; i < rawHeaders.length; i += 2)
    headers[rawHeaders[i].toLowerCase()] ??= rawHeaders[i + 1];
  const req = /** @type {any} */ ({ headers, rawHeaders });
  /** @type {unknown[]} */
  const nexts = [];
  await authenticate({ metrics, ...deps })(
    req,
    /** @type {any} */ ({}),
    (/** @type {unknown} */ err) => void nexts.push(err),
  );
  assert.equal(nexts.length, 1, 'next called once');
  return { err: nexts[0], req, counted };
}

const tokens = {
  current: new TokenSet([
    { name: 'feeder', token: 'feeder-token-1' },
    { name: 'crm', token: 'crm-token-2' },
  ]),
};
/** @param {string} header */
const unauthorized = (header) => (/** @type {unknown} */ err) =>
  err instanceof UnauthorizedError && err.headers['WWW-Authenticate'] === header;

describe('authenticate: who may POST /users (unit)', () => {
  test('nothing configured: every request passes, counted nowhere', async () => {
    const { err, counted } = await run({}, []);
    assert.equal(err, undefined);
    assert.deepEqual(counted, { accepted: [], refused: [] });
  });

  test("a client's static token: accepted under its name, the scheme in any case, spaces after it", async () => {
    for (const header of ['Bearer crm-token-2', 'bearer crm-token-2', 'BEARER   crm-token-2']) {
      const { err, req, counted } = await run({ tokens }, ['Authorization', header]);
      assert.equal(err, undefined, header);
      assert.equal(req.clientName, 'crm');
      assert.deepEqual(counted, { accepted: ['crm'], refused: [] });
    }
  });

  test('no header, another scheme, an unknown token: 401, each counted for its reason', async () => {
    const missing = await run({ tokens }, []);
    assert.ok(unauthorized('Bearer')(missing.err));
    assert.deepEqual(missing.counted.refused, ['missing']);
    assert.equal(missing.req.clientName, undefined);
    for (const header of ['Basic ZmVlZGVyOng=', 'Bearer', 'Bearer ', 'feeder-token-1']) {
      const malformed = await run({ tokens }, ['Authorization', header]);
      assert.ok(unauthorized('Bearer error="invalid_request"')(malformed.err), header);
      assert.deepEqual(malformed.counted.refused, ['malformed'], header);
    }
    const unknown = await run({ tokens }, ['Authorization', 'Bearer feeder-token-1x']);
    assert.ok(unauthorized('Bearer error="invalid_token"')(unknown.err));
    assert.deepEqual(unknown.counted, { accepted: [], refused: ['unknown_token'] });
  });

  test('Authorization twice: 400 duplicate_header, whatever either says', async () => {
    const { err, counted } = await run({ tokens }, [
      'Authorization',
      'Bearer feeder-token-1',
      'authorization',
      'Bearer feeder-token-1',
    ]);
    assert.ok(err instanceof ApiError && err.code === 'duplicate_header');
    assert.deepEqual(counted, { accepted: [], refused: [] });
  });

  test("a JWT: its subject is the client, counted as jwt; a refusal is a 401 with the verifier's reason; any other failure passes on as it is", async () => {
    /** @type {string[]} */
    const asked = [];
    const verifyJwt = async (/** @type {string} */ t) => (
      asked.push(t),
      { client: t === JWT ? 'billing' : undefined, mayErase: false }
    );
    const good = await run({ tokens, verifyJwt }, ['Authorization', `Bearer ${JWT}`]);
    assert.equal(good.err, undefined);
    assert.equal(good.req.clientName, 'billing');
    assert.deepEqual(good.counted, { accepted: [JWT_LABEL], refused: [] });
    const nameless = await run({ verifyJwt }, ['Authorization', 'Bearer a.b.c']);
    assert.equal(nameless.req.clientName, JWT_LABEL);

    const notJwt = await run({ tokens, verifyJwt }, ['Authorization', 'Bearer not-a-jwt']);
    assert.deepEqual(notJwt.counted.refused, ['unknown_token']);
    assert.deepEqual(asked, [JWT, 'a.b.c'], 'what has not the shape of a JWT is never verified');

    const refusing = async () => {
      throw new JwtRefusal('the token has expired', 'expired');
    };
    const expired = await run({ verifyJwt: refusing }, ['Authorization', `Bearer ${JWT}`]);
    assert.ok(
      unauthorized('Bearer error="invalid_token"')(expired.err) &&
        /** @type {Error} */ (expired.err).message === 'the token has expired',
    );
    assert.deepEqual(expired.counted, { accepted: [], refused: ['expired'] });
    assert.equal(expired.req.clientName, undefined);

    const broken = new Error('a bug');
    const failing = await run(
      {
        verifyJwt: async () => {
          throw broken;
        },
      },
      ['Authorization', `Bearer ${JWT}`],
    );
    assert.equal(failing.err, broken);
    assert.deepEqual(failing.counted, { accepted: [], refused: [] });
  });

  test('a static token that looks like a JWT is matched first, never verified', async () => {
    const jwtLike = { current: new TokenSet([{ name: 'odd', token: JWT }]) };
    const verifyJwt = async () => assert.fail('verified');
    const { err, req } = await run({ tokens: jwtLike, verifyJwt }, [
      'Authorization',
      `Bearer ${JWT}`,
    ]);
    assert.equal(err, undefined);
    assert.equal(req.clientName, 'odd');
  });

  test('a token and a JWT of one name are two clients: one name, two scopes', async () => {
    const alice = { current: new TokenSet([{ name: 'alice', token: 'alice-token-1' }]) };
    const verifyJwt = async () => ({ client: 'alice', mayErase: false });
    const byToken = await run({ tokens: alice, verifyJwt }, [
      'Authorization',
      'Bearer alice-token-1',
    ]);
    const byJwt = await run({ tokens: alice, verifyJwt }, ['Authorization', `Bearer ${JWT}`]);
    assert.deepEqual([byToken.req.clientName, byToken.req.clientScope], ['alice', 'token:alice']);
    assert.deepEqual([byJwt.req.clientName, byJwt.req.clientScope], ['alice', 'jwt:alice']);
    const nameless = await run(
      { verifyJwt: async () => ({ client: undefined, mayErase: false }) },
      ['Authorization', `Bearer ${JWT}`],
    );
    assert.equal(nameless.req.clientScope, 'jwt:');
    assert.equal(
      (await run({}, [])).req.clientScope,
      undefined,
      'nothing configured: no scope (one anonymous client)',
    );
  });

  test("the request learns whether its credentials grant erasing: a token's as declared, a JWT's as verified", async () => {
    const declared = {
      current: new TokenSet([
        { name: 'ops', token: 'ops-token-1', erase: true },
        { name: 'crm', token: 'crm-token-2' },
      ]),
    };
    /** @param {string} t */
    const verifyJwt = async (t) => ({ client: 'dpo', mayErase: t === JWT });
    const mayErase = async (/** @type {string} */ bearer) =>
      (await run({ tokens: declared, verifyJwt }, ['Authorization', `Bearer ${bearer}`])).req
        .mayErase;
    assert.equal(await mayErase('ops-token-1'), true);
    assert.equal(await mayErase('crm-token-2'), false);
    assert.equal(await mayErase(JWT), true);
    assert.equal(await mayErase('a.b.c'), false);
    const refused = await run({ tokens: declared }, ['Authorization', 'Bearer nope']);
    assert.equal(refused.req.mayErase, undefined, 'refused: no right either');
    assert.equal((await run({}, [])).req.mayErase, undefined, 'nothing configured: left unset');
  });

  test('no token name, JWT subject or the anonymous client share a scope', () => {
    const subject = fc.option(fc.string({ maxLength: 40 }), { nil: undefined });
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), subject, subject, (name, a, b) => {
        assert.notEqual(tokenScope(name), jwtScope(a));
        assert.notEqual(tokenScope(name), ANONYMOUS_CLIENT);
        assert.notEqual(jwtScope(a), ANONYMOUS_CLIENT);
        assert.equal(jwtScope(a) === jwtScope(b), (a ?? '') === (b ?? ''));
      }),
      { numRuns: 2000 },
    );
  });
});
