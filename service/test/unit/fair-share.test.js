import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import fc from 'fast-check';
import {
  AdmissionBudget,
  AdmissionRefusedError,
  WAITING_BUDGETS,
} from '../../src/http/admission-budget.js';
import { FairQueue, shareOf, withinShare } from '../../src/http/fair-share.js';

/** @param {string} key @param {number} [weight] @param {number} [maxInFlightBytes] @returns {import('../../src/http/fair-share.js').FairClient} */
const clientOf = (key, weight = 1, maxInFlightBytes = undefined) => ({
  key,
  label: key,
  weight,
  ...(maxInFlightBytes === undefined ? {} : { maxInFlightBytes }),
});
const noisy = clientOf('noisy');
const quiet = clientOf('quiet');

/** Lets settled promises run their callbacks. */
const turn = () => new Promise((r) => setImmediate(r));

describe('fair share: who goes next, and what one client may hold (unit)', () => {
  test('a client that has waited little goes before another one with a backlog, whatever the backlog', () => {
    const queue = /** @type {FairQueue<{ bytes: number, id: string }>} */ (new FairQueue());
    for (let i = 0; i < 50; i++) queue.push(noisy, { bytes: 1000, id: `noisy-${i}` });
    const first = queue.peek();
    assert.equal(first?.id, 'noisy-0');
    queue.remove(noisy, /** @type {any} */ (first));
    queue.push(quiet, { bytes: 1000, id: 'quiet-0' });
    assert.equal(queue.peek()?.id, 'quiet-0', 'quiet next, ahead of 49 of noisy');
  });

  test('each client keeps its own order; a skipped client is passed over', () => {
    const queue = /** @type {FairQueue<{ bytes: number, id: string }>} */ (new FairQueue());
    queue.push(noisy, { bytes: 10, id: 'n0' });
    queue.push(noisy, { bytes: 10, id: 'n1' });
    queue.push(quiet, { bytes: 10, id: 'q0' });
    assert.equal(queue.peek()?.id, 'n0');
    assert.equal(queue.peek((c) => c.key === 'noisy')?.id, 'q0');
    assert.equal(
      queue.peek(() => true),
      undefined,
    );
  });

  test('over time, backlogged clients are let in bytes in proportion to their weights (within one request)', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            weight: fc.integer({ min: 1, max: 8 }),
            sizes: fc.array(fc.integer({ min: 1, max: 1000 }), { minLength: 200, maxLength: 200 }),
          }),
          { minLength: 2, maxLength: 4 },
        ),
        (specs) => {
          const queue = /** @type {FairQueue<{ bytes: number, at: number }>} */ (new FairQueue());
          const clients = specs.map((s, i) => clientOf(`c${i}`, s.weight));
          specs.forEach((s, i) =>
            s.sizes.forEach((bytes) => queue.push(clients[i], { bytes, at: i })),
          );
          const served = clients.map(() => 0);
          // While every client still has a backlog: 100 requests let in.
          for (let n = 0; n < 100; n++) {
            const next = /** @type {{ bytes: number, at: number }} */ (queue.peek());
            queue.remove(clients[next.at], next);
            served[next.at] += next.bytes;
          }
          // Normalised by weight, no client is ahead of another by more than two of the largest requests.
          const normalised = served.map((b, i) => b / clients[i].weight);
          return Math.max(...normalised) - Math.min(...normalised) <= 2 * 1000;
        },
      ),
    );
  });

  test('a share: the budget by weight among the clients waiting; a client holding nothing always may take one', () => {
    assert.equal(shareOf(clientOf('a', 3), 1, 1000), 750);
    assert.equal(
      withinShare(noisy, 0, 5000, 1, 1000),
      true,
      'nothing held: one request, whatever its size',
    );
    assert.equal(withinShare(noisy, 400, 100, 1, 1000), true);
    assert.equal(withinShare(noisy, 400, 101, 1, 1000), false, 'over half while another waits');
    assert.equal(
      withinShare(noisy, 400, 600, 0, 1000),
      true,
      'nobody else waits: the whole budget',
    );
    assert.equal(
      withinShare(clientOf('capped', 1, 500), 400, 101, 0, 1000),
      false,
      'its own cap, whoever waits',
    );
  });
});

describe('admission budget: clients in turn (unit)', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout'] }));
  afterEach(() => mock.timers.reset());

  // 16,000 bytes: 15,000 for large bodies (over 1,000 bytes), 1,000 reserved for small ones.
  const budgetOf = () => new AdmissionBudget({ budgetBytes: 16_000, maxWaitMs: 60_000 });

  test('the budget full of one client, another is let in at the next release, ahead of its backlog', async () => {
    const budget = budgetOf();
    const held = [budget.tryAcquire(7000, noisy), budget.tryAcquire(7000, noisy)];
    assert.ok(held.every(Boolean));
    /** @type {string[]} */
    const order = [];
    const backlog = [1, 2, 3, 4, 5].map((i) =>
      budget.acquire(7000, undefined, noisy).then((g) => (order.push(`noisy-${i}`), g)),
    );
    await turn();
    const quietGrant = budget.acquire(7000, undefined, quiet).then((g) => (order.push('quiet'), g));
    await turn();
    assert.deepEqual(order, []);
    budget.release(/** @type {any} */ (held[0]));
    await quietGrant;
    await turn();
    assert.deepEqual(order, ['quiet'], 'quiet at the next release; noisy, at its share, waits');
    assert.equal(budget.heldBy(quiet), 7000);
    // Once quiet is done, noisy's backlog goes on, in its order.
    budget.release(await quietGrant);
    budget.release(/** @type {any} */ (held[1]));
    await turn();
    assert.deepEqual(order, ['quiet', 'noisy-1', 'noisy-2']);
    await Promise.all(backlog.map((p) => p.then((g) => budget.release(g))));
    assert.deepEqual(order, ['quiet', 'noisy-1', 'noisy-2', 'noisy-3', 'noisy-4', 'noisy-5']);
    assert.equal(budget.usage.totalBytes, 0);
  });

  test('while another client waits, a client holds no more than its share, by weight', async () => {
    const budget = budgetOf();
    const heavy = clientOf('heavy', 3);
    const first = /** @type {any} */ (budget.tryAcquire(10_000, noisy));
    const waiting = budget.acquire(9000, undefined, heavy);
    await turn();
    // Noisy holds 10,000; heavy waits for 9,000; noisy's share is now a quarter of 16,000.
    assert.equal(
      budget.tryAcquire(2000, noisy),
      undefined,
      'noisy may not grow past its share while heavy waits',
    );
    assert.equal(budget.tryAcquire(2000, quiet), undefined, 'nor may a newcomer pass heavy');
    budget.release(first);
    const grant = await waiting;
    assert.equal(budget.heldBy(heavy), 9000);
    budget.release(grant);
  });

  test('a client never holds more than its own cap, even with the budget free', async () => {
    const budget = budgetOf();
    const capped = clientOf('capped', 1, 8000);
    const first = /** @type {any} */ (budget.tryAcquire(5000, capped));
    assert.equal(budget.tryAcquire(5000, capped), undefined);
    let admitted = false;
    const second = budget.acquire(5000, undefined, capped).then((g) => ((admitted = true), g));
    await turn();
    assert.equal(admitted, false);
    const other = await budget.acquire(5000, undefined, quiet);
    assert.equal(budget.heldBy(quiet), 5000, 'another client is not held back by it');
    assert.equal(admitted, false);
    budget.release(other);
    budget.release(first);
    budget.release(await second);
    assert.equal(admitted, true);
  });

  test('with others waiting, a client fills only its share of the waiting room: beyond, refused with share', async () => {
    const budget = new AdmissionBudget({ budgetBytes: 16_000, maxWaitMs: 60_000 });
    const held = /** @type {any} */ (budget.tryAcquire(15_000, quiet));
    // The waiting room is WAITING_BUDGETS budgets. Noisy waits alone for more than half of it.
    const room = 16_000 * WAITING_BUDGETS;
    const noisyWaits = Array.from({ length: Math.floor(room / 2 / 10_000) + 1 }, () =>
      budget.acquire(10_000, undefined, noisy),
    );
    const quietWaits = budget.acquire(10_000, undefined, quiet);
    await turn();
    // Now quiet waits too: noisy's share of the room is half, and it already waits for more.
    await assert.rejects(
      budget.acquire(10_000, undefined, noisy),
      (err) => err instanceof AdmissionRefusedError && err.reason === 'share',
    );
    // Quiet is still let wait (its own waiting is within its share).
    const quietAgain = budget.acquire(5000, undefined, quiet);
    const done = [quietWaits, quietAgain, ...noisyWaits].map((p) =>
      p.then((g) => budget.release(g)),
    );
    budget.release(held);
    await Promise.all(done);
    assert.equal(budget.usage.totalBytes, 0);
  });
});
