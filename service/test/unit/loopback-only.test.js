import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApiError } from '../../src/errors.js';
import { isLoopback, loopbackOnly } from '../../src/http/loopback-only.js';

/** What the guard passes on for a request from `address`. @param {{ open: boolean }} options @param {string | undefined} address */
function verdict(options, address) {
  /** @type {unknown[]} */
  const passed = [];
  loopbackOnly('GET /metrics', options)(
    /** @type {any} */ ({ socket: { remoteAddress: address } }),
    /** @type {any} */ ({}),
    (err) => passed.push(err),
  );
  assert.equal(passed.length, 1, 'next called once');
  return passed[0];
}

describe('GET /metrics served to loopback only unless asked (unit)', () => {
  test('loopback addresses, IPv4, IPv6 and IPv4-mapped, and nothing else', () => {
    for (const address of ['127.0.0.1', '127.10.20.30', '::1', '::ffff:127.0.0.1'])
      assert.equal(isLoopback(address), true, address);
    for (const address of [
      '10.0.0.5',
      '192.168.1.2',
      '::ffff:10.0.0.5',
      'fe80::1',
      '::',
      '0.0.0.0',
      '1.127.0.0',
      undefined,
    ])
      assert.equal(isLoopback(address), false, String(address));
  });

  test('a remote address is answered 404 not_found naming METRICS_PUBLIC; loopback passes', () => {
    const refused = verdict({ open: false }, '10.1.2.3');
    assert.ok(refused instanceof ApiError);
    assert.equal(refused.code, 'not_found');
    assert.equal(refused.status, 404);
    assert.match(refused.message, /METRICS_PUBLIC=true/);
    assert.equal(verdict({ open: false }, '127.0.0.1'), undefined);
  });

  test('METRICS_PUBLIC=true: every address passes', () => {
    assert.equal(verdict({ open: true }, '10.1.2.3'), undefined);
  });
});
