import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import {
  AdmissionBudget,
  AdmissionRefusedError,
  SMALL_BODY_BYTES,
} from '../../src/http/admission-budget.js';
import { admitRequest } from '../../src/http/admission.js';

const MiB = 1024 * 1024;
const budgetOf = (/** @type {number} */ maxWaitMs = 60_000) =>
  new AdmissionBudget({ budgetBytes: 16 * MiB, maxWaitMs });

beforeEach(() => mock.timers.enable({ apis: ['setTimeout'] }));
afterEach(() => mock.timers.reset());

/** Lets settled promises run their callbacks (setImmediate stays real). */
const turn = () => new Promise((r) => setImmediate(r));

/** Fills the whole budget: the large share, then the reserve with small bodies. @param {AdmissionBudget} budget */
function fill(budget) {
  const grants = [budget.tryAcquire(15 * MiB)];
  for (let g = budget.tryAcquire(SMALL_BODY_BYTES); g; g = budget.tryAcquire(SMALL_BODY_BYTES))
    grants.push(g);
  return /** @type {import('../../src/http/admission-budget.js').Grant[]} */ (grants);
}

/** A request and response as admitRequest sees them. @param {Record<string, string>} headers */
function exchange(headers) {
  const req = Object.assign(new PassThrough(), { headers, complete: false });
  const res = Object.assign(new EventEmitter(), {
    destroyed: false,
    writableFinished: false,
    /** @type {Record<string, any>} */ locals: {},
    setHeader() {},
  });
  /** @type {unknown[]} */
  const nextCalls = [];
  return { req, res, nextCalls, next: (/** @type {unknown} */ err) => nextCalls.push(err) };
}

describe('admission: small bodies that wait, and grants nobody is left to use (unit)', () => {
  test('small bodies that must wait are admitted first come, first served, as room is made', async () => {
    const budget = budgetOf();
    const held = fill(budget);
    /** @type {number[]} */
    const order = [];
    const waiting = [100, 2000, 50].map((bytes, i) =>
      budget.acquire(bytes).then((g) => (order.push(i), g)),
    );
    await turn();
    assert.deepEqual(order, [], 'all three wait');
    assert.equal(budget.tryAcquire(10), undefined, 'a newcomer does not pass those waiting');
    budget.release(/** @type {any} */ (held.at(-1)));
    await Promise.all(waiting);
    assert.deepEqual(order, [0, 1, 2]);
  });

  test('a small body waits at most maxWaitMs, then is refused with timeout and holds nothing', async () => {
    const budget = budgetOf(500);
    const held = fill(budget);
    const total = budget.usage.totalBytes;
    const waiting = budget.acquire(100);
    waiting.catch(() => {});
    mock.timers.tick(499);
    await turn();
    assert.equal(budget.usage.waiting, 1);
    mock.timers.tick(1);
    await assert.rejects(
      waiting,
      (err) => err instanceof AdmissionRefusedError && err.reason === 'timeout',
    );
    assert.deepEqual(budget.usage, { ...budget.usage, totalBytes: total, waiting: 0 });
    for (const g of held) budget.release(g);
    assert.equal(budget.usage.totalBytes, 0);
  });

  test('a grant that arrives after the client left is given back at once: the budget returns to zero and admits again', async () => {
    const budget = budgetOf();
    const holder = /** @type {any} */ (budget.tryAcquire(15 * MiB));
    const x = exchange({ 'content-length': String(5 * MiB) });
    /** @type {(req: any, res: any, next: any) => void} */ (
      admitRequest({ budget, maxBodyBytes: 64 * MiB })
    )(x.req, x.res, x.next);
    await turn();
    assert.equal(budget.usage.waiting, 1);
    // The socket is gone, its 'close' not yet emitted when the grant comes.
    x.res.destroyed = true;
    budget.release(holder);
    await turn();
    assert.deepEqual(x.nextCalls, [], 'nothing runs for a client that left');
    assert.equal(budget.usage.totalBytes, 0, 'the grant was released');
    x.res.emit('close');
    assert.ok(budget.tryAcquire(15 * MiB), 'the whole large share admits again');
  });

  test('a grant that arrives once the response has finished is given back too', async () => {
    const budget = budgetOf();
    const holder = /** @type {any} */ (budget.tryAcquire(15 * MiB));
    const x = exchange({ 'content-length': String(5 * MiB) });
    /** @type {(req: any, res: any, next: any) => void} */ (
      admitRequest({ budget, maxBodyBytes: 64 * MiB })
    )(x.req, x.res, x.next);
    await turn();
    x.res.writableFinished = true;
    budget.release(holder);
    await turn();
    assert.deepEqual(x.nextCalls, []);
    assert.equal(budget.usage.totalBytes, 0);
  });

  test('a streamed body is charged what it holds at once (holdBytes), at most its declared size, before it is read', () => {
    const budget = budgetOf();
    const admit = /** @type {(req: any, res: any, next: any) => void} */ (
      admitRequest({ budget, maxBodyBytes: 64 * MiB, holdBytes: 2 * MiB })
    );
    const chunked = exchange({ 'transfer-encoding': 'chunked' });
    admit(chunked.req, chunked.res, chunked.next);
    assert.equal(budget.usage.totalBytes, 2 * MiB, 'no length: the hold');
    assert.equal(chunked.res.locals.bodyAllowance, undefined, 'charged up front, not as read');
    const short = exchange({ 'content-length': String(1000) });
    admit(short.req, short.res, short.next);
    assert.equal(
      budget.usage.totalBytes,
      2 * MiB + 1000,
      'a declared size under the hold: its size',
    );
    const long = exchange({ 'content-length': String(40 * MiB) });
    admit(long.req, long.res, long.next);
    assert.equal(
      budget.usage.totalBytes,
      4 * MiB + 1000,
      'a declared size over the hold: the hold',
    );
    const gzip = exchange({ 'content-length': String(1000), 'content-encoding': 'gzip' });
    admit(gzip.req, gzip.res, gzip.next);
    assert.equal(
      budget.usage.totalBytes,
      6 * MiB + 1000,
      'compressed: the hold, whatever its size',
    );
    for (const x of [chunked, short, long, gzip]) x.res.emit('close');
    assert.equal(budget.usage.totalBytes, 0);
  });
});
