import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createWriteGate, writeSlotsFor } from '../../src/users/write-gate.js';

describe('write gate: writes of one kind, a few at a time (unit)', () => {
  test('at most `slots` at once, the others in order as each ends, a failure freeing its slot too', async () => {
    const through = createWriteGate(2);
    let running = 0;
    let most = 0;
    /** @type {number[]} */
    const started = [];
    /** @type {(() => void)[]} */
    const finish = [];
    const writes = [0, 1, 2, 3].map((i) =>
      through(async () => {
        running++;
        most = Math.max(most, running);
        started.push(i);
        await new Promise((resolve) => finish.push(() => resolve(undefined)));
        running--;
        if (i === 0) throw new Error('its own failure');
        return i;
      }),
    );
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, [0, 1]);
    finish[0]();
    await assert.rejects(writes[0], /its own failure/);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(started, [0, 1, 2]);
    for (let i = 1; i < 4; i++) {
      finish[i]();
      await new Promise((r) => setImmediate(r));
    }
    assert.deepEqual(await Promise.all(writes.slice(1)), [1, 2, 3]);
    assert.equal(most, 2);
  });

  test("requests written alone get half the pool, never group commit's connections, at least one", () => {
    assert.equal(writeSlotsFor(10, 2), 5);
    assert.equal(writeSlotsFor(11, 2), 6);
    assert.equal(writeSlotsFor(40, 2), 20);
    assert.equal(writeSlotsFor(4, 2), 2);
    assert.equal(writeSlotsFor(3, 2), 1);
    assert.equal(writeSlotsFor(1, 2), 1);
  });
});
