import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { merge } from '../../src/users/group-commit.js';
import { createReplayGuess } from '../../src/users/replay-guess.js';

/** @typedef {import('../../src/users/user-schema.js').UserRow} UserRow */
/** @param {string} email @param {string} [name] @returns {UserRow} */
const row = (email, name = 'N') => [email, name, null, null];

describe('merge (unit)', () => {
  test('each email once, owned by the first request that sent it, sorted', () => {
    const waiting = [[row('b@x.co'), row('d@x.co')], [row('a@x.co'), row('b@x.co', 'later')], [row('c@x.co')]].map((rows) => ({ rows, resolve() {}, reject() {}, since: 0 }));
    const { rows, owner } = merge(waiting);
    assert.deepEqual(rows.map((r) => r[0]), ['a@x.co', 'b@x.co', 'c@x.co', 'd@x.co']);
    assert.equal(rows[1][1], 'N', 'the first request wins the row');
    assert.deepEqual([...owner.entries()].sort(), [['a@x.co', 1], ['b@x.co', 0], ['c@x.co', 2], ['d@x.co', 0]]);
  });
});

describe('createReplayGuess (unit)', () => {
  test('likely for holdMs after a replay, then not', () => {
    let t = 1000;
    const guess = createReplayGuess({ holdMs: 50, now: () => t });
    assert.equal(guess.likely(), false);
    guess.seen();
    t += 49;
    assert.equal(guess.likely(), true);
    t += 2;
    assert.equal(guess.likely(), false);
  });
});
