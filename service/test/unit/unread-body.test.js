import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import { holdContinue, sendContinue } from '../../src/http/expect-continue.js';
import {
  HOLD_ABOVE_BYTES,
  MAX_HELD_BODIES,
  REFUSED_BODY_HOLD_MS,
  finishUnreadBody,
  heldBodyCount,
} from '../../src/http/unread-body.js';

const LIMITS = { maxBodyBytes: 1000, bodyReadTimeoutMs: 5000 };
const RATE_LIMITED = {
  maxBodyBytes: 10 * HOLD_ABOVE_BYTES,
  bodyReadTimeoutMs: 5000,
  code: 'rate_limited',
};
const LARGE = { 'content-length': String(HOLD_ABOVE_BYTES + 1) };

/** A request whose body has not been read, and its response. @param {Record<string, string>} [headers] */
function exchange(headers = { 'content-length': '800' }) {
  const socket = { destroy: mock.fn() };
  const req = Object.assign(new EventEmitter(), {
    complete: false,
    headers,
    socket,
    resume: mock.fn(),
    pause: mock.fn(),
    read: mock.fn(),
  });
  /** @type {Record<string, string>} */ const set = {};
  const res = /** @type {any} */ (
    Object.assign(new EventEmitter(), {
      headersSent: false,
      setHeader: (/** @type {string} */ k, /** @type {string} */ v) => (set[k] = v),
      writeContinue: mock.fn(),
    })
  );
  return { req: /** @type {any} */ (req), res, set, socket };
}

describe('the body left unread by a refusal (unit)', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout'] }));
  afterEach(() => mock.timers.reset());

  test('a body read in full: nothing to do, the connection as it was', () => {
    const x = exchange();
    x.req.complete = true;
    finishUnreadBody(x.req, x.res, LIMITS);
    assert.equal(x.req.resume.mock.callCount(), 0);
    assert.deepEqual(x.set, {});
  });

  test('a body still coming is read and dropped, and the connection kept', () => {
    const x = exchange();
    finishUnreadBody(x.req, x.res, LIMITS);
    assert.equal(x.req.resume.mock.callCount(), 1);
    x.req.emit('data', Buffer.alloc(500));
    x.req.emit('data', Buffer.alloc(300));
    x.req.emit('end');
    mock.timers.tick(10_000);
    assert.equal(
      x.socket.destroy.mock.callCount(),
      0,
      'neither the byte bound nor the time bound was crossed',
    );
    assert.deepEqual(x.set, {});
  });

  test('past MAX_BODY_BYTES, or past BODY_READ_TIMEOUT_MS, the connection is cut', () => {
    const big = exchange({ 'transfer-encoding': 'chunked' });
    finishUnreadBody(big.req, big.res, LIMITS);
    big.req.emit('data', Buffer.alloc(1001));
    assert.equal(big.socket.destroy.mock.callCount(), 1);

    const slow = exchange();
    finishUnreadBody(slow.req, slow.res, LIMITS);
    slow.req.emit('data', Buffer.alloc(10));
    mock.timers.tick(4999);
    assert.equal(slow.socket.destroy.mock.callCount(), 0);
    mock.timers.tick(1);
    assert.equal(slow.socket.destroy.mock.callCount(), 1);
  });

  test('closed after the answer instead: a body declared over the limit, a refusal about its arrival, a client waiting for 100 Continue', () => {
    const over = exchange({ 'content-length': '5000' });
    finishUnreadBody(over.req, over.res, LIMITS);
    const late = exchange();
    finishUnreadBody(late.req, late.res, { ...LIMITS, code: 'body_timeout' });
    const waiting = exchange({ 'content-length': '800', expect: '100-continue' });
    holdContinue(waiting.res);
    finishUnreadBody(waiting.req, waiting.res, LIMITS);
    for (const x of [over, late, waiting]) {
      assert.equal(x.set.Connection, 'close');
      assert.equal(x.req.resume.mock.callCount(), 0, 'nothing more is read');
    }
  });

  test('a large body of a client over its rate is held unread, then read and dropped on the same connection; a small one read at once', () => {
    const small = exchange({ 'content-length': String(HOLD_ABOVE_BYTES) });
    finishUnreadBody(small.req, small.res, RATE_LIMITED);
    assert.equal(small.req.pause.mock.callCount(), 0);
    assert.equal(small.req.resume.mock.callCount(), 1, 'read at once');

    const x = exchange(LARGE);
    finishUnreadBody(x.req, x.res, RATE_LIMITED);
    assert.equal(x.req.pause.mock.callCount(), 1);
    assert.deepEqual(
      x.req.read.mock.calls.map((c) => c.arguments),
      [[0]],
      'counted as read, so Node does not drop it itself',
    );
    mock.timers.tick(REFUSED_BODY_HOLD_MS - 1);
    assert.equal(x.req.resume.mock.callCount(), 0, 'held');
    mock.timers.tick(1);
    assert.equal(x.req.resume.mock.callCount(), 1, 'then read and dropped');
    x.req.emit('data', Buffer.alloc(HOLD_ABOVE_BYTES + 1));
    x.req.emit('end');
    assert.equal(x.socket.destroy.mock.callCount(), 0);
    assert.deepEqual(x.set, {}, 'the connection kept');
  });

  test('a body without a length of a client over its rate is held as a large one is', () => {
    const x = exchange({ 'transfer-encoding': 'chunked' });
    finishUnreadBody(x.req, x.res, RATE_LIMITED);
    assert.equal(x.req.pause.mock.callCount(), 1);
    assert.equal(heldBodyCount(), 1);
    mock.timers.tick(REFUSED_BODY_HOLD_MS - 1);
    assert.equal(x.req.resume.mock.callCount(), 0, 'held');
    mock.timers.tick(1);
    assert.equal(x.req.resume.mock.callCount(), 1, 'then read and dropped');
    assert.equal(heldBodyCount(), 0);
  });

  test('held bodies are bounded: past MAX_HELD_BODIES one is read at once; a connection closed while held frees its place', () => {
    const held = Array.from({ length: MAX_HELD_BODIES }, () => exchange(LARGE));
    for (const x of held) finishUnreadBody(x.req, x.res, RATE_LIMITED);
    const over = exchange(LARGE);
    finishUnreadBody(over.req, over.res, RATE_LIMITED);
    assert.equal(over.req.pause.mock.callCount(), 0);
    assert.equal(over.req.resume.mock.callCount(), 1, 'read and dropped at once');
    held[0].req.emit('close');
    const next = exchange(LARGE);
    finishUnreadBody(next.req, next.res, RATE_LIMITED);
    assert.equal(next.req.pause.mock.callCount(), 1, 'held in the place the closed one left');
    mock.timers.tick(REFUSED_BODY_HOLD_MS);
    assert.equal(held[0].req.resume.mock.callCount(), 0, 'a closed connection is not read');
    for (const x of [...held.slice(1), next]) assert.equal(x.req.resume.mock.callCount(), 1);
    const after = exchange(LARGE);
    finishUnreadBody(after.req, after.res, RATE_LIMITED);
    assert.equal(after.req.pause.mock.callCount(), 1, 'every place given back once read');
    mock.timers.tick(REFUSED_BODY_HOLD_MS);
  });

  test('100 Continue goes out once, and only for a response the server held it back for', () => {
    const held = exchange();
    holdContinue(held.res);
    sendContinue(held.res);
    sendContinue(held.res);
    assert.equal(held.res.writeContinue.mock.callCount(), 1);
    const plain = exchange();
    sendContinue(plain.res);
    assert.equal(
      plain.res.writeContinue.mock.callCount(),
      0,
      'Node sent it itself, or the client did not ask',
    );
  });
});
