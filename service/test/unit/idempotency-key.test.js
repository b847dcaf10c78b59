import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { parseIdempotencyKey, readIdempotencyKey } from '../../src/http/idempotency-key.js';

// The Idempotency-Key header as RFC 8941 writes a String: visible ASCII, `"` and `\` escaped.

/** A key as a client's structured-field serialiser writes it. @param {string} key */
const serialised = (key) => `"${key.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`;
const visibleAscii = fc.string({
  unit: fc.integer({ min: 0x20, max: 0x7e }).map((c) => String.fromCharCode(c)),
  minLength: 1,
  maxLength: 255,
});

describe('parseIdempotencyKey', () => {
  test('every key of 1 to 255 visible ASCII characters reads back as it was written', () => {
    fc.assert(
      fc.property(visibleAscii, (key) => parseIdempotencyKey(serialised(key)) === key),
      { numRuns: 2000 },
    );
  });

  test('spaces around it and parameters after it are allowed (RFC 8941 3.1.2)', () => {
    assert.equal(parseIdempotencyKey('  "k"  '), 'k');
    assert.equal(parseIdempotencyKey('"k";a;b=1;c="x;y";d=?1;e=tok/en;f=:aGk=:'), 'k');
  });

  test('anything else is malformed_idempotency_key', () => {
    const refused = [
      '',
      'k',
      '""',
      `"${'k'.repeat(256)}"`,
      '"k',
      'k"',
      '"a\\b"',
      '"a\\"',
      '"a" "b"',
      '"a", "b"',
      '"a";',
      '"a";B=1',
      '"a"x',
      ':aGk=:',
      '1',
      '"a\u0007"',
      '"é"',
    ];
    for (const value of refused) {
      assert.throws(
        () => parseIdempotencyKey(value),
        (/** @type {any} */ err) => err.code === 'malformed_idempotency_key' && err.status === 400,
        JSON.stringify(value),
      );
    }
  });

  test('a character outside visible ASCII anywhere in the key is refused', () => {
    const outside = fc
      .integer({ min: 0, max: 0xffff })
      .filter((c) => c < 0x20 || c > 0x7e)
      .map((c) => String.fromCharCode(c));
    fc.assert(
      fc.property(
        fc.string({ maxLength: 20 }),
        outside,
        fc.string({ maxLength: 20 }),
        (a, bad, b) => {
          assert.throws(() =>
            parseIdempotencyKey(
              `"${a.replace(/[^\x20-\x7e]|["\\]/g, '')}${bad}${b.replace(/[^\x20-\x7e]|["\\]/g, '')}"`,
            ),
          );
        },
      ),
    );
  });

  test("a key's scope is its request's client scope; without credentials, the one anonymous client", () => {
    /** @param {string | undefined} clientScope */
    const scopeOf = (clientScope) => {
      const res = /** @type {any} */ ({ locals: {} });
      readIdempotencyKey()(
        /** @type {any} */ ({
          headers: { 'idempotency-key': '"k"' },
          url: '/users',
          clientName: 'alice',
          clientScope,
        }),
        res,
        () => {},
      );
      return res.locals.idempotency.client;
    };
    assert.equal(scopeOf('token:alice'), 'token:alice');
    assert.equal(scopeOf('jwt:alice'), 'jwt:alice');
    assert.equal(scopeOf(undefined), 'anonymous');
  });
});
