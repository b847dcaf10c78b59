import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { SignJWT } from 'jose';
import { startEraseProbe } from '../../../test/support/erase-probe.js';

const JWT_SECRET = `erase-right-${randomBytes(24).toString('hex')}`;

/** @param {string} role @param {string} sub */
const jwtOf = (role, sub) =>
  new SignJWT({ role, sub })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(JWT_SECRET));

/**
 * The right to erase over HTTP, on the service's own request path (request log, authenticate,
 * requireEraseRight, error handler) before a route that counts what reaches it: a client whose
 * credentials grant it goes on, any other is 403 forbidden with PostgREST's 42501 and reaches
 * nothing; its name, never its credential, in the log. Without credentials anyone goes on.
 */
describe('the right to erase: 403 forbidden unless the credentials grant it', () => {
  const opsToken = `ops-${randomBytes(16).toString('hex')}`;
  const crmToken = `crm-${randomBytes(16).toString('hex')}`;
  /** @type {Awaited<ReturnType<typeof startEraseProbe>>} */ let probe;

  before(async () => {
    probe = await startEraseProbe({
      env: {
        INGEST_TOKENS: JSON.stringify({ ops: { token: opsToken, erase: true }, crm: crmToken }),
        JWT_SECRET,
        JWT_ERASE_ROLES: 'dpo',
      },
    });
  });
  after(() => probe?.close());

  test('a token without "erase": true is 403 forbidden, 42501, and reaches nothing; its name logged, never its token', async () => {
    const before = probe.reached();
    const res = await probe.erase(crmToken);
    assert.equal(res.status, 403);
    assert.deepEqual(res.body, {
      error: 'forbidden',
      message:
        'the client "crm" may not erase: its credentials do not grant it; nothing was erased',
      code: '42501',
      details: null,
      hint: null,
    });
    assert.equal(probe.reached(), before, 'the route was never reached');
    const refusal = probe.logs.find((l) => l.msg === 'refused: this client may not erase');
    assert.equal(refusal?.client, 'crm');
    assert.equal(refusal?.level, 40);
    const access = probe.logs.findLast((l) => l.msg === 'request completed');
    assert.deepEqual([access?.client, access?.res.statusCode], ['crm', 403]);
    const logged = JSON.stringify(probe.logs);
    for (const secret of [crmToken, opsToken, JWT_SECRET])
      assert.equal(logged.includes(secret), false, 'a credential in the log');
  });

  test('a token with "erase": true goes on to the route', async () => {
    const before = probe.reached();
    const res = await probe.erase(opsToken);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(probe.reached(), before + 1);
  });

  test('a JWT goes on when its role is one of JWT_ERASE_ROLES; of another role, 403', async () => {
    const before = probe.reached();
    assert.equal((await probe.erase(await jwtOf('dpo', 'privacy-desk'))).status, 200);
    const writer = await probe.erase(await jwtOf('writer', 'billing'));
    assert.equal(writer.status, 403);
    assert.equal(writer.body.error, 'forbidden');
    assert.match(writer.body.message, /^the client "billing" may not erase/);
    assert.equal(probe.reached(), before + 1);
  });

  test('no credentials or a token no client has: 401 first, as on every route', async () => {
    const before = probe.reached();
    assert.equal((await probe.erase()).status, 401);
    assert.equal((await probe.erase('nobody-has-this')).body.error, 'unauthorized');
    assert.equal(probe.reached(), before);
  });
});

describe('the right to erase where one credential or none is configured', () => {
  test('INGEST_TOKEN, the one operator credential, may erase', async (t) => {
    const token = `operator-${randomBytes(16).toString('hex')}`;
    const probe = await startEraseProbe({ env: { INGEST_TOKEN: token } });
    t.after(() => probe.close());
    assert.equal((await probe.erase(token)).status, 200);
    assert.equal(probe.reached(), 1);
  });

  test('no credentials configured (the local default): anyone may erase, as anyone may write', async (t) => {
    const probe = await startEraseProbe();
    t.after(() => probe.close());
    assert.equal((await probe.erase()).status, 200);
    assert.equal((await probe.erase('whatever')).status, 200, 'a bearer is not even read');
    assert.equal(probe.reached(), 2);
  });
});
