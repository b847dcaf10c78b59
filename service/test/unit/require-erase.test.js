import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApiError, ForbiddenError } from '../../src/errors.js';
import { requireEraseRight } from '../../src/http/require-erase.js';

/**
 * The middleware over one request; resolves with what it passed to next and the lines it logged.
 * @param {Parameters<typeof requireEraseRight>[0]} auth @param {Record<string, unknown>} fields
 */
function run(auth, fields) {
  /** @type {unknown[][]} */
  const logged = [];
  const log = { warn: (/** @type {unknown[]} */ ...line) => void logged.push(line) };
  const req = /** @type {any} */ ({ ...fields, log });
  /** @type {unknown[]} */
  const nexts = [];
  requireEraseRight(auth)(
    req,
    /** @type {any} */ ({}),
    (/** @type {unknown} */ err) => void nexts.push(err),
  );
  assert.equal(nexts.length, 1, 'next called once');
  return { err: nexts[0], logged };
}

const CONFIGURED = { tokens: {}, verifyJwt: undefined };

describe('requireEraseRight: who may erase (unit)', () => {
  test('nothing configured: every request goes on, whatever it carries, and nothing is logged', () => {
    for (const fields of [{}, { mayErase: false }, { mayErase: true, clientName: 'x' }]) {
      const { err, logged } = run({ tokens: undefined, verifyJwt: undefined }, fields);
      assert.equal(err, undefined);
      assert.deepEqual(logged, []);
    }
  });

  test('configured, a token or a JWT alike: only a request whose credentials grant erasing goes on', () => {
    for (const auth of [CONFIGURED, { tokens: undefined, verifyJwt: () => {} }]) {
      assert.equal(run(auth, { clientName: 'ops', mayErase: true }).err, undefined);
      for (const mayErase of [false, undefined, 'true', 1]) {
        const { err } = run(auth, { clientName: 'crm', mayErase });
        assert.ok(err instanceof ForbiddenError, String(mayErase));
        assert.ok(err instanceof ApiError);
        assert.equal(err.status, 403);
        assert.equal(err.code, 'forbidden');
      }
    }
  });

  test('a refusal names the client in its message and its log line, and logs nothing else', () => {
    const { err, logged } = run(CONFIGURED, {
      clientName: 'crm',
      mayErase: false,
      headers: { authorization: 'Bearer tok-crm-secret' },
    });
    assert.equal(
      /** @type {Error} */ (err).message,
      'the client "crm" may not erase: its credentials do not grant it; nothing was erased',
    );
    assert.deepEqual(logged, [[{ client: 'crm' }, 'refused: this client may not erase']]);
    const nameless = run(CONFIGURED, {});
    assert.match(/** @type {Error} */ (nameless.err).message, /^this client may not erase/);
  });
});
