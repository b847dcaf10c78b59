import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { READINESS_HOLD_MS, createReadiness } from '../../src/db/database.js';

/** A check that answers when told to, counting its calls. @param {import('../../src/db/database.js').Readiness} verdict */
function heldCheck(verdict) {
  /** @type {(() => void)[]} */ const waiting = [];
  let calls = 0;
  return {
    calls: () => calls,
    release: () => waiting.splice(0).forEach((answer) => answer()),
    check: () => {
      calls++;
      return new Promise((resolve) => waiting.push(() => resolve(verdict)));
    },
  };
}

describe('/readyz verdict: one check at a time, kept a second (unit)', () => {
  test('a thousand probes while a check runs share it; those within the hold are answered from it', async (t) => {
    let now = 0;
    t.mock.method(performance, 'now', () => now);
    const pooled = heldCheck({ ready: true });
    const fresh = heldCheck({ ready: true });
    const readiness = createReadiness({
      pooled: pooled.check,
      fresh: fresh.check,
      poolBusy: () => false,
    });
    const answers = Array.from({ length: 1000 }, () => readiness());
    pooled.release();
    assert.deepEqual(new Set((await Promise.all(answers)).map((a) => a.ready)), new Set([true]));
    assert.equal(pooled.calls(), 1, 'one check for a thousand concurrent probes');
    now += READINESS_HOLD_MS - 1;
    assert.equal((await readiness()).ready, true);
    assert.equal(pooled.calls(), 1, 'within the hold: no check');
    now += 1;
    const next = readiness();
    pooled.release();
    await next;
    assert.equal(pooled.calls(), 2, 'past the hold: checked again');
    assert.equal(fresh.calls(), 0);
  });

  test('a failed check is a 503 verdict, kept as long; a busy pool is asked around, on a fresh connection', async (t) => {
    let now = 0;
    t.mock.method(performance, 'now', () => now);
    let busy = false;
    const fresh = heldCheck({ ready: true });
    let pooledCalls = 0;
    const readiness = createReadiness({
      pooled: () => {
        pooledCalls++;
        return Promise.reject(new Error('no connection'));
      },
      fresh: fresh.check,
      poolBusy: () => busy,
    });
    assert.deepEqual(await readiness(), { ready: false });
    assert.deepEqual(await readiness(), { ready: false });
    assert.equal(pooledCalls, 1);
    now += READINESS_HOLD_MS;
    busy = true;
    const answer = readiness();
    fresh.release();
    assert.deepEqual(await answer, { ready: true });
    assert.equal(pooledCalls, 1, 'the busy pool was not asked');
    assert.equal(fresh.calls(), 1);
  });
});
