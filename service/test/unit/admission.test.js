import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import {
  AdmissionBudget,
  AdmissionRefusedError,
  SMALL_BODY_BYTES,
  WAITING_BUDGETS,
} from '../../src/http/admission-budget.js';
import { admitRequest } from '../../src/http/admission.js';
import { readBody } from '../../src/http/read-body.js';

const KiB = 1024;
const MiB = 1024 * KiB;
// 16 MiB: a reserve of 1 MiB for small bodies, 15 MiB for large ones.
const budgetOf = (/** @type {number} */ maxWaitMs = 60_000) =>
  new AdmissionBudget({ budgetBytes: 16 * MiB, maxWaitMs });

// Every wait here runs on node:test's mock timers: a bound of minutes is checked in no time, to the
// millisecond, and no real timer is left behind. setImmediate stays real: it lets promises settle.
beforeEach(() => mock.timers.enable({ apis: ['setTimeout'] }));
afterEach(() => mock.timers.reset());

/** @param {Promise<unknown>} promise @returns {Promise<boolean>} whether it settled by the next turn of the event loop */
const settled = async (promise) => {
  let done = false;
  promise.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((r) => setImmediate(r));
  return done;
};

/** @param {string} reason */
const refusedFor = (reason) => (/** @type {unknown} */ err) =>
  err instanceof AdmissionRefusedError &&
  err.status === 503 &&
  err.code === 'overloaded' &&
  err.reason === reason;

describe('admission budget (unit)', () => {
  test('shares: the reserve is 1/16 of the budget and only small bodies may use it', () => {
    const budget = budgetOf();
    assert.equal(budget.reservedBytes, 1 * MiB);
    assert.equal(budget.largeShareBytes, 15 * MiB);
    assert.equal(budget.smallBodyBytes, SMALL_BODY_BYTES);
  });

  test('admits at once what fits, and counts it until released', () => {
    const budget = budgetOf();
    const a = budget.tryAcquire(5 * MiB);
    const b = budget.tryAcquire(100);
    assert.ok(a && b);
    assert.deepEqual(budget.usage, {
      totalBytes: 5 * MiB + 100,
      largeBytes: 5 * MiB,
      smallBytes: 100,
      waiting: 0,
    });
    budget.release(a);
    budget.release(b);
    assert.deepEqual(budget.usage, { totalBytes: 0, largeBytes: 0, smallBytes: 0, waiting: 0 });
  });

  test('a release counts once, however often it is called', () => {
    const budget = budgetOf();
    const a = /** @type {import('../../src/http/admission-budget.js').Grant} */ (
      budget.tryAcquire(10 * MiB)
    );
    const b = budget.tryAcquire(4 * MiB);
    assert.ok(b);
    budget.release(a);
    budget.release(a);
    assert.equal(budget.usage.totalBytes, 4 * MiB);
  });

  test('large bodies never take the reserve: small ones still get in when the large share is full', () => {
    const budget = budgetOf();
    assert.ok(budget.tryAcquire(15 * MiB));
    assert.equal(budget.tryAcquire(1 * MiB), undefined, 'a large body waits');
    for (let i = 0; i < 16; i++)
      assert.ok(budget.tryAcquire(SMALL_BODY_BYTES), `small body ${i} admitted`);
    assert.equal(budget.tryAcquire(SMALL_BODY_BYTES), undefined, 'the reserve is used up');
  });

  test('small bodies may use the whole budget while no large one waits, only the reserve while one does', async () => {
    const budget = budgetOf();
    const smalls = Array.from({ length: 200 }, () => budget.tryAcquire(SMALL_BODY_BYTES));
    assert.ok(smalls.every(Boolean), '12.5 MiB of small bodies admitted');
    const large = budget.acquire(10 * MiB);
    assert.equal(await settled(large), false, 'the large one waits');
    assert.equal(budget.tryAcquire(100), undefined, 'new small ones no longer pass it');
    // Small ones leave until 2.5 MiB remain: the large one fits and goes first.
    for (const g of smalls.slice(0, 160)) budget.release(/** @type {any} */ (g));
    const grant = await large;
    assert.equal(grant.bytes, 10 * MiB);
    assert.ok(budget.tryAcquire(100), 'no large one waits any more');
  });

  test('large requests are admitted first come, first served', async () => {
    const budget = budgetOf();
    const holder = /** @type {any} */ (budget.tryAcquire(15 * MiB));
    /** @type {number[]} */
    const order = [];
    const waiting = [8 * MiB, 2 * MiB, 5 * MiB].map((bytes, i) =>
      budget.acquire(bytes).then((g) => (order.push(i), g)),
    );
    assert.equal(budget.tryAcquire(1 * MiB), undefined, 'a newcomer does not pass those waiting');
    budget.release(holder);
    await Promise.all(waiting);
    assert.deepEqual(order, [0, 1, 2]);
  });

  test('a body larger than the large share is charged the share: it runs alone, rather than never', async () => {
    const budget = budgetOf();
    const small = budget.tryAcquire(100);
    const huge = budget.tryAcquire(40 * MiB);
    assert.equal(huge?.bytes, 15 * MiB);
    assert.equal(budget.tryAcquire(1 * MiB), undefined);
    assert.ok(small && huge);
    budget.release(huge);
    assert.ok(budget.tryAcquire(1 * MiB));
  });

  test('refuses at once when WAITING_BUDGETS budgets of bytes already wait, or when waiting is off', async () => {
    const budget = budgetOf();
    budget.tryAcquire(15 * MiB);
    const controller = new AbortController();
    const waiters = Array.from({ length: 2 * WAITING_BUDGETS }, () =>
      budget.acquire(budget.budgetBytes / 2, controller.signal),
    );
    await assert.rejects(budget.acquire(1 * MiB), refusedFor('queue_full'));
    assert.equal(budget.usage.waiting, 2 * WAITING_BUDGETS);
    controller.abort();
    for (const w of waiters) await assert.rejects(w, refusedFor('aborted'));

    const impatient = budgetOf(0);
    impatient.tryAcquire(15 * MiB);
    await assert.rejects(impatient.acquire(1 * MiB), refusedFor('queue_full'));
  });

  test('waits at most maxWaitMs, then refuses and leaves the queue', async () => {
    const budget = budgetOf(2000);
    budget.tryAcquire(15 * MiB);
    const waiting = budget.acquire(1 * MiB);
    mock.timers.tick(1999);
    assert.equal(await settled(waiting), false, 'still waiting 1 ms before the bound');
    assert.equal(budget.usage.waiting, 1);
    mock.timers.tick(1);
    assert.equal(await settled(waiting), true, 'refused at the bound');
    await assert.rejects(waiting, refusedFor('timeout'));
    assert.equal(budget.usage.waiting, 0);
  });

  test('a request admitted before its bound is not refused when the bound comes', async () => {
    const budget = budgetOf(2000);
    const holder = /** @type {any} */ (budget.tryAcquire(15 * MiB));
    const waiting = budget.acquire(1 * MiB);
    mock.timers.tick(1000);
    budget.release(holder);
    const grant = await waiting;
    mock.timers.tick(5000);
    assert.equal(grant.released, false);
    assert.deepEqual(budget.usage, {
      totalBytes: 1 * MiB,
      largeBytes: 1 * MiB,
      smallBytes: 0,
      waiting: 0,
    });
  });

  test('a client that goes away while waiting leaves the queue and holds nothing', async () => {
    const budget = budgetOf();
    const holder = /** @type {any} */ (budget.tryAcquire(15 * MiB));
    const controller = new AbortController();
    const waiting = budget.acquire(1 * MiB, controller.signal);
    controller.abort();
    await assert.rejects(waiting, refusedFor('aborted'));
    budget.release(holder);
    assert.deepEqual(budget.usage, { totalBytes: 0, largeBytes: 0, smallBytes: 0, waiting: 0 });
  });

  test('a large request that gives up waiting lets the small ones it held back in', async () => {
    const budget = budgetOf();
    budget.tryAcquire(10 * MiB);
    for (let i = 0; i < 40; i++) budget.tryAcquire(SMALL_BODY_BYTES);
    // 12.5 MiB held: a small one would fit, but a large one waits and small ones are past the reserve.
    const controller = new AbortController();
    const large = budget.acquire(5 * MiB, controller.signal);
    const small = budget.acquire(100);
    assert.equal(await settled(small), false);
    controller.abort();
    await assert.rejects(large, refusedFor('aborted'));
    assert.equal((await small).bytes, 100);
  });

  test('a body read without a length grows its grant until it would overflow', () => {
    const budget = budgetOf();
    budget.tryAcquire(10 * MiB);
    const grant = /** @type {any} */ (budget.tryAcquire(0));
    assert.equal(budget.grow(grant, 10 * KiB), true);
    assert.equal(grant.large, false);
    assert.equal(budget.grow(grant, 5 * MiB), true);
    assert.equal(grant.large, true);
    assert.deepEqual(budget.usage, {
      totalBytes: 15 * MiB,
      largeBytes: 15 * MiB,
      smallBytes: 0,
      waiting: 0,
    });
    assert.equal(budget.grow(grant, 5 * MiB + 1), false);
    budget.release(grant);
    assert.equal(budget.usage.totalBytes, 10 * MiB);
  });

  test('onChange sees every change, for the gauges', async () => {
    /** @type {number[]} */
    const seen = [];
    const budget = new AdmissionBudget({
      budgetBytes: 16 * MiB,
      maxWaitMs: 1000,
      onChange: (b) => seen.push(b.usage.totalBytes),
    });
    const g = /** @type {any} */ (budget.tryAcquire(1000));
    budget.release(g);
    assert.deepEqual(seen, [1000, 0]);
  });
});

describe('admitRequest middleware (unit, fake request and response)', () => {
  const MAX_BODY = 10 * MiB;

  /**
   * A request and its response as far as the middleware uses them, and what it did with them.
   * @param {Record<string, string>} headers
   */
  function exchange(headers) {
    // A stream, as the body reader reads it.
    const req = Object.assign(new PassThrough(), { headers, complete: false });
    const res = Object.assign(new EventEmitter(), {
      destroyed: false,
      writableFinished: false,
      /** @type {Record<string, any>} */ locals: {},
      /** @type {Record<string, string>} */ set: {},
      /** @param {string} name @param {string} value */
      setHeader(name, value) {
        this.set[name] = value;
      },
    });
    /** @type {unknown[]} */
    const nextCalls = [];
    return { req, res, nextCalls, next: (/** @type {unknown} */ err) => nextCalls.push(err) };
  }

  function metricsSpy() {
    return {
      shed: mock.fn((/** @type {string} */ _reason) => {}),
      waited: mock.fn((/** @type {number} */ _s) => {}),
      observe: mock.fn(),
    };
  }

  /** @param {AdmissionBudget} budget @param {ReturnType<typeof metricsSpy>} [metrics] */
  const middleware = (budget, metrics) =>
    /** @type {(req: any, res: any, next: any) => void} */ (
      admitRequest({ budget, maxBodyBytes: MAX_BODY, metrics })
    );

  test('a body that fits is admitted at once, charged its Content-Length, and released once when the response closes', () => {
    const budget = budgetOf();
    const x = exchange({ 'content-length': String(2 * MiB) });
    middleware(budget)(x.req, x.res, x.next);
    assert.deepEqual(x.nextCalls, [undefined], 'next() in the same tick, without an error');
    assert.equal(budget.usage.totalBytes, 2 * MiB);
    x.res.emit('close');
    x.res.emit('close');
    assert.equal(budget.usage.totalBytes, 0);
  });

  test('a Content-Length over MAX_BODY_BYTES is passed on uncharged: the body reader refuses it', () => {
    const budget = budgetOf();
    const x = exchange({ 'content-length': String(MAX_BODY + 1) });
    middleware(budget)(x.req, x.res, x.next);
    assert.deepEqual(x.nextCalls, [undefined]);
    assert.equal(budget.usage.totalBytes, 0);
  });

  test('a compressed body is charged what it may decode to, MAX_BODY_BYTES, however small it is', () => {
    const budget = budgetOf();
    const x = exchange({ 'content-length': '100', 'content-encoding': 'gzip' });
    middleware(budget)(x.req, x.res, x.next);
    assert.equal(budget.usage.totalBytes, MAX_BODY);
    const identity = exchange({ 'content-length': '100', 'content-encoding': 'Identity' });
    middleware(budget)(identity.req, identity.res, identity.next);
    assert.equal(budget.usage.totalBytes, MAX_BODY + 100, 'identity is no encoding');
  });

  test('a body without a length is charged as it arrives, and cut off with an overflow 503 when it outgrows the budget', async () => {
    const budget = budgetOf();
    budget.tryAcquire(10 * MiB);
    const metrics = metricsSpy();
    const x = exchange({ 'transfer-encoding': 'chunked' });
    /** @type {unknown[]} */
    const requestErrors = [];
    middleware(budget, metrics)(x.req, x.res, x.next);
    // The body reader, given admission's allowance, may start whenever it likes: here a turn later.
    await settled(Promise.resolve());
    readBody(
      /** @type {any} */ (x.req),
      x.req,
      { limit: MAX_BODY, allowance: x.res.locals.bodyAllowance },
      (err) => requestErrors.push(err),
    );
    /** @param {number} bytes */
    const arrive = async (bytes) => {
      x.req.write(Buffer.alloc(bytes));
      await settled(Promise.resolve());
    };
    assert.equal(budget.usage.totalBytes, 10 * MiB, 'nothing charged before a byte arrives');
    await arrive(4 * MiB);
    assert.equal(budget.usage.totalBytes, 14 * MiB);
    await arrive(2 * MiB);
    assert.equal(requestErrors.length, 1);
    assert.ok(refusedFor('overflow')(requestErrors[0]));
    assert.deepEqual(
      metrics.shed.mock.calls.map((c) => c.arguments),
      [['overflow']],
    );
    assert.equal(budget.usage.totalBytes, 10 * MiB, 'its bytes are given back at once');
    await arrive(MiB);
    assert.equal(budget.usage.totalBytes, 10 * MiB, 'and no longer counted');
  });

  test('the body reader may start any time after admission: what arrived before it is read, and charged as it is read', async () => {
    const budget = budgetOf();
    const x = exchange({ 'transfer-encoding': 'chunked' });
    middleware(budget)(x.req, x.res, x.next);
    x.req.write(Buffer.alloc(3 * MiB));
    await settled(Promise.resolve());
    assert.equal(budget.usage.totalBytes, 0, 'nothing read, nothing charged');
    /** @type {{ err: unknown, body: Buffer | undefined }[]} */
    const read = [];
    readBody(
      /** @type {any} */ (x.req),
      x.req,
      { limit: MAX_BODY, allowance: x.res.locals.bodyAllowance },
      (err, body) => read.push({ err, body }),
    );
    x.req.end(Buffer.alloc(MiB));
    await settled(Promise.resolve());
    await settled(Promise.resolve());
    assert.equal(read.length, 1);
    assert.equal(read[0].err, undefined);
    assert.equal(read[0].body?.length, 4 * MiB, 'no byte lost to a listener before the reader');
    assert.equal(budget.usage.totalBytes, 4 * MiB);
    x.res.emit('close');
    assert.equal(budget.usage.totalBytes, 0);
  });

  test('a request that must wait goes on when room is made, and the wait is measured', async () => {
    const budget = budgetOf();
    const holder = /** @type {any} */ (budget.tryAcquire(15 * MiB));
    const metrics = metricsSpy();
    const x = exchange({ 'content-length': String(5 * MiB) });
    middleware(budget, metrics)(x.req, x.res, x.next);
    await settled(Promise.resolve());
    assert.deepEqual(x.nextCalls, [], 'waiting');
    budget.release(holder);
    await settled(Promise.resolve());
    assert.deepEqual(x.nextCalls, [undefined]);
    assert.equal(budget.usage.totalBytes, 5 * MiB);
    assert.equal(metrics.waited.mock.callCount(), 1);
    x.res.emit('close');
    assert.equal(budget.usage.totalBytes, 0);
  });

  test("a request that waited past ADMISSION_WAIT_MS gets the 503; what becomes of its unread body is the error handler's (http/unread-body.js)", async () => {
    const budget = budgetOf(2000);
    budget.tryAcquire(15 * MiB);
    const metrics = metricsSpy();
    const x = exchange({ 'content-length': String(5 * MiB) });
    middleware(budget, metrics)(x.req, x.res, x.next);
    mock.timers.tick(2000);
    await settled(Promise.resolve());
    assert.equal(x.nextCalls.length, 1);
    assert.ok(refusedFor('timeout')(x.nextCalls[0]));
    assert.equal(x.res.set.Connection, undefined);
    assert.deepEqual(
      metrics.shed.mock.calls.map((c) => c.arguments),
      [['timeout']],
    );
  });

  test('a client that leaves while waiting stops waiting and holds nothing', async () => {
    const budget = budgetOf();
    const holder = /** @type {any} */ (budget.tryAcquire(15 * MiB));
    const metrics = metricsSpy();
    const x = exchange({ 'content-length': String(5 * MiB) });
    middleware(budget, metrics)(x.req, x.res, x.next);
    x.res.destroyed = true;
    x.res.emit('close');
    await settled(Promise.resolve());
    assert.ok(refusedFor('aborted')(x.nextCalls[0]));
    assert.equal(budget.usage.waiting, 0);
    budget.release(holder);
    assert.equal(budget.usage.totalBytes, 0, 'nothing was granted to the request that left');
  });
});
