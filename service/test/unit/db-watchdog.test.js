import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createDbWatchdog } from '../../src/db/watchdog.js';

/** @param {{ answers: boolean }} database */
function setup(database) {
  let t = 0;
  let probes = 0;
  /** @type {number[]} */ const cuts = [];
  const watchdog = createDbWatchdog({
    stallMs: 2_000,
    now: () => t,
    probe: async () => {
      probes++;
      return database.answers;
    },
    onCut: (n) => cuts.push(n),
  });
  /** @type {string[]} */ const cutQueries = [];
  /** @param {string} name */
  const watch = (name) => watchdog.watch(() => cutQueries.push(name));
  return {
    watchdog,
    watch,
    cuts,
    cutQueries,
    probes: () => probes,
    advance: (/** @type {number} */ ms) => {
      t += ms;
    },
  };
}

describe('the database watchdog (unit)', () => {
  test('no query past stallMs: no probe, nothing cut', async () => {
    const s = setup({ answers: false });
    const done = s.watch('quick');
    s.advance(1_999);
    await s.watchdog.check();
    assert.equal(s.probes(), 0);
    done();
    s.watchdog.stop();
  });

  test('a stalled query on a database that answers a fresh connection (a lock wait, a long batch) is left alone', async () => {
    const s = setup({ answers: true });
    s.watch('waiting for a lock');
    s.advance(5_000);
    await s.watchdog.check();
    assert.equal(s.probes(), 1);
    assert.deepEqual(s.cutQueries, []);
    s.watchdog.stop();
  });

  test('a database that does not answer: the stalled queries are cut, the ones that just began are not', async () => {
    const s = setup({ answers: false });
    s.watch('old-1');
    s.watch('old-2');
    const finished = s.watch('finished');
    finished();
    s.advance(2_500);
    s.watch('new');
    await s.watchdog.check();
    assert.deepEqual(s.cutQueries, ['old-1', 'old-2']);
    assert.deepEqual(s.cuts, [2]);
    await s.watchdog.check();
    assert.deepEqual(s.cutQueries, ['old-1', 'old-2'], 'a cut query is cut once');
    s.watchdog.stop();
  });

  test('checks that overlap share one probe', async () => {
    const s = setup({ answers: true });
    s.watch('stalled');
    s.advance(3_000);
    await Promise.all([s.watchdog.check(), s.watchdog.check(), s.watchdog.check()]);
    assert.equal(s.probes(), 1);
    s.watchdog.stop();
  });
});
