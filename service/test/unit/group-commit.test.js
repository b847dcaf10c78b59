import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DatabaseTimeoutError, DatabaseUnavailableError } from '../../src/errors.js';
import { createGroupCommit } from '../../src/users/group-commit.js';
import { createReplayGuess } from '../../src/users/replay-guess.js';
import { credit } from '../../src/users/user-writer.js';
import { createWritePolicy } from '../../src/users/write-policy.js';
import { part, userRow } from '../../../test/support/user-rows.js';

/** @typedef {import('../../src/users/user-schema.js').UserRow} UserRow */
/** @param {string} email @param {string} [name] @returns {UserRow} */
const row = (email, name = 'N') => userRow({ email, name });

/**
 * A writer whose writes finish only when the test says so, recording what was written and how
 * many writes ran at once.
 * @param {{ failGroup?: (rows: UserRow[]) => unknown, failAlone?: (rows: UserRow[]) => unknown, failSlow?: (rows: UserRow[]) => unknown }} [faults]
 */
function scriptedWriter(faults = {}) {
  /** @type {{ kind: 'group' | 'alone' | 'slow', emails: string[], resolution: string, finish: () => void }[]} */
  const writes = [];
  let running = 0;
  let mostAtOnce = 0;
  /** @param {'group' | 'alone' | 'slow'} kind @param {UserRow[]} rows @param {string} resolution @param {() => any} outcome */
  const write = (kind, rows, resolution, outcome) => {
    running++;
    mostAtOnce = Math.max(mostAtOnce, running);
    return new Promise((resolve, reject) => {
      writes.push({
        kind,
        emails: rows.map((r) => r.email),
        resolution,
        finish() {
          running--;
          try {
            resolve(outcome());
          } catch (err) {
            reject(err);
          }
        },
      });
    });
  };
  return {
    writes,
    mostAtOnce: () => mostAtOnce,
    /**
     * The user writer's one way in: a group is credited per request, a request alone its own.
     * @param {import('../../src/users/user-writer.js').WriteRequest} request
     */
    write: ({ kind, rows, resolution, parts = [{ rows, withRows: false }] }) => {
      const scripted = /** @type {'group' | 'alone' | 'slow'} */ (kind);
      const fault = { group: faults.failGroup, alone: faults.failAlone, slow: faults.failSlow }[
        scripted
      ];
      return write(scripted, rows, resolution, () => {
        const failure = fault?.(rows);
        if (failure) throw failure;
        return parts.map((p) => credit(p.rows, 'all'));
      });
    },
    /** Finishes the writes of one kind started so far. @param {'group' | 'alone' | 'slow'} kind */
    async finish(kind) {
      for (const w of writes.filter((x) => x.kind === kind)) {
        writes.splice(writes.indexOf(w), 1);
        w.finish();
      }
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    },
    /** Finishes every write started so far, and lets the promises settle. */
    async finishAll() {
      for (const w of writes.splice(0)) w.finish();
      // Settling, diagnosing and starting the next writes take a few turns of the event loop.
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    },
  };
}

/**
 * @param {ReturnType<typeof scriptedWriter>} w
 * @param {{ maxInFlight?: number, maxRows?: number, maxSlow?: number, diagnosis?: import('../../src/db/database.js').Diagnosis, tableLocked?: boolean }} [o]
 */
const groupCommit = (
  w,
  { maxInFlight = 1, maxRows = 1000, maxSlow = 4, diagnosis = 'own', tableLocked = false } = {},
) =>
  createGroupCommit({
    write: w.write,
    policy: createWritePolicy({
      diagnose: async () => diagnosis,
      isTableLocked: async () => tableLocked,
    }),
    maxRows,
    maxInFlight,
    maxSlow,
  });

/**
 * A request's outcome, observed from the start, so a rejection is never left unhandled while the
 * test drives the writer.
 * @template T @param {Promise<T>} p
 * @returns {Promise<PromiseSettledResult<T>>}
 */
const settled = (p) =>
  p.then(
    (value) => ({ status: /** @type {const} */ ('fulfilled'), value }),
    (reason) => ({ status: /** @type {const} */ ('rejected'), reason }),
  );

/** Drains until nothing is left to write. @param {ReturnType<typeof scriptedWriter>} w */
async function finishEverything(w) {
  for (let i = 0; i < 100 && w.writes.length > 0; i++) await w.finishAll();
}

describe('group commit with a scripted writer (unit)', () => {
  test('requests that arrive while a group is written go out together, each with its own counts', async () => {
    const w = scriptedWriter();
    const gc = groupCommit(w);
    const first = gc.writeUsers(part([row('a@x.co')]), 'ignore');
    const rest = [
      gc.writeUsers(part([row('c@x.co'), row('d@x.co')]), 'ignore'),
      gc.writeUsers(part([row('b@x.co')]), 'ignore'),
    ];
    assert.deepEqual(
      w.writes.map((x) => x.emails),
      [['a@x.co']],
      'the first goes at once, alone',
    );
    await w.finishAll();
    assert.deepEqual(
      w.writes.map((x) => x.emails),
      [['b@x.co', 'c@x.co', 'd@x.co']],
      'the others together, sorted by email',
    );
    await finishEverything(w);
    assert.deepEqual(await Promise.all([first, ...rest]), [
      { inserted: 1, updated: 0 },
      { inserted: 2, updated: 0 },
      { inserted: 1, updated: 0 },
    ]);
  });

  test('two requests sharing an email never share a statement, and the later waits for the earlier to commit; requests for other emails are not held back', async () => {
    const w = scriptedWriter();
    const gc = groupCommit(w, { maxInFlight: 2 });
    const a = gc.writeUsers(part([row('same@x.co', 'A')]), 'merge');
    const b = gc.writeUsers(part([row('other@x.co'), row('same@x.co', 'B')]), 'merge');
    const c = gc.writeUsers(part([row('third@x.co')]), 'merge');
    assert.deepEqual(
      w.writes.map((x) => x.emails),
      [['same@x.co'], ['third@x.co']],
      'b waits although a slot is free; c, behind it, takes the slot',
    );
    const d = gc.writeUsers(part([row('other@x.co', 'D')]), 'merge');
    await w.finishAll();
    assert.deepEqual(
      w.writes.map((x) => x.emails),
      [['other@x.co', 'same@x.co']],
      'b once a is committed; d, which shares an email with b, behind it',
    );
    await w.finishAll();
    assert.deepEqual(
      w.writes.map((x) => x.emails),
      [['other@x.co']],
    );
    await finishEverything(w);
    await Promise.all([a, b, c, d]);
  });

  test('a group holds one resolution: a merge among ignores goes in a group of its own, and a later request for its email after it', async () => {
    const w = scriptedWriter();
    const gc = groupCommit(w);
    const opener = gc.writeUsers(part([row('o@x.co')]), 'ignore');
    const all = [
      gc.writeUsers(part([row('i1@x.co')]), 'ignore'),
      gc.writeUsers(part([row('m1@x.co')]), 'merge'),
      gc.writeUsers(part([row('i2@x.co')]), 'ignore'),
      gc.writeUsers(part([row('m1@x.co', 'again')]), 'ignore'),
    ];
    await w.finishAll();
    assert.deepEqual(
      w.writes.map((x) => [x.resolution, x.emails]),
      [['ignore', ['i1@x.co', 'i2@x.co']]],
      'the ignores together; the merge, and the ignore of its email, wait',
    );
    await w.finishAll();
    assert.deepEqual(
      w.writes.map((x) => [x.resolution, x.emails]),
      [['merge', ['m1@x.co']]],
    );
    await w.finishAll();
    assert.deepEqual(
      w.writes.map((x) => [x.resolution, x.emails]),
      [['ignore', ['m1@x.co']]],
    );
    await finishEverything(w);
    await Promise.all([opener, ...all]);
  });

  test('a group never holds more than maxRows rows, and no request is cut in two', async () => {
    const w = scriptedWriter();
    const gc = groupCommit(w, { maxRows: 5 });
    const opener = gc.writeUsers(part([row('0@x.co')]), 'ignore');
    const all = Array.from({ length: 6 }, (_, i) =>
      gc.writeUsers(part([row(`${i}a@x.co`), row(`${i}b@x.co`)]), 'ignore'),
    );
    /** @type {number[]} */ const sizes = [];
    for (let i = 0; i < 10 && w.writes.length > 0; i++) {
      sizes.push(...w.writes.map((x) => x.emails.length));
      await w.finishAll();
    }
    assert.deepEqual(sizes, [1, 4, 4, 4]);
    await Promise.all([opener, ...all]);
  });

  test('a group that fails for a reason of its own: each request is written again alone, in the write slots, and only the guilty one fails', async () => {
    const poison = Object.assign(new Error('check violation'), { code: '23514' });
    const w = scriptedWriter({
      failGroup: () => poison,
      failAlone: (rows) => (rows[0].email.startsWith('bad') ? poison : undefined),
    });
    const gc = groupCommit(w, { maxInFlight: 2 });
    const opener = settled(gc.writeUsers(part([row('opener@x.co')]), 'ignore'));
    const requests = Array.from({ length: 20 }, (_, i) =>
      settled(gc.writeUsers(part([row(`${i === 7 ? 'bad' : 'good'}-${i}@x.co`)]), 'ignore')),
    );
    await finishEverything(w);
    const results = await Promise.all([opener, ...requests]);
    assert.equal(
      results[0].status,
      'fulfilled',
      'the opener was a group of one, and its group failed; alone it is good',
    );
    assert.deepEqual(
      results.slice(1).map((r) => r.status),
      requests.map((_, i) => (i === 7 ? 'rejected' : 'fulfilled')),
    );
    assert.equal(
      /** @type {PromiseRejectedResult} */ (results[8]).reason,
      poison,
      'the guilty one gets its own failure, not a 503',
    );
    assert.ok(
      w.mostAtOnce() <= 2,
      `never more than the two write slots at once, got ${w.mostAtOnce()}`,
    );
  });

  test('a group that fails with the database unavailable: every request of it gets DatabaseUnavailableError, none is retried', async () => {
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const w = scriptedWriter({ failGroup: () => refused });
    const gc = groupCommit(w, { diagnosis: 'unavailable' });
    const all = [1, 2, 3].map((i) => settled(gc.writeUsers(part([row(`${i}@x.co`)]), 'ignore')));
    /** @type {string[]} */ const kinds = [];
    for (let i = 0; i < 10 && w.writes.length > 0; i++) {
      kinds.push(...w.writes.map((x) => x.kind));
      await w.finishAll();
    }
    for (const r of await Promise.all(all))
      assert.ok(
        r.status === 'rejected' &&
          r.reason instanceof DatabaseUnavailableError &&
          r.reason.cause === refused,
      );
    assert.deepEqual(kinds, ['group', 'group'], 'no request written alone');
  });
});

describe('group commit when another writer holds a row (unit)', () => {
  const lockTimeout = Object.assign(new Error('canceling statement due to lock timeout'), {
    code: '55P03',
  });
  const lockedOut = new DatabaseTimeoutError('lock_timeout', lockTimeout);
  /** @param {UserRow[]} rows */
  const locked = (rows) => (rows.some((r) => r.email === 'locked@x.co') ? lockedOut : undefined);

  test('the group is split; the locked request waits in the slow lane, its retry behind it, and nothing else waits', async () => {
    const w = scriptedWriter({
      failGroup: (rows) => (locked(rows) ? lockTimeout : undefined),
      failAlone: locked,
    });
    const gc = groupCommit(w, { diagnosis: 'lock_timeout' });
    const opener = settled(gc.writeUsers(part([row('opener@x.co')]), 'ignore'));
    const lockedOne = settled(gc.writeUsers(part([row('locked@x.co')]), 'ignore'));
    const others = Array.from({ length: 5 }, (_, i) =>
      settled(gc.writeUsers(part([row(`other-${i}@x.co`)]), 'ignore')),
    );
    // The opener alone, then the locked one grouped with the others; the group fails, is split.
    await w.finish('group');
    assert.deepEqual(
      w.writes.map((x) => x.emails.length),
      [6],
    );
    await w.finish('group');
    assert.deepEqual(
      w.writes.map((x) => [x.kind, x.emails]),
      [['alone', ['locked@x.co']]],
    );
    for (let i = 0; i < 6; i++) await w.finish('alone');
    assert.deepEqual(
      w.writes.map((x) => [x.kind, x.emails]),
      [['slow', ['locked@x.co']]],
      'only the locked one still waits, outside the write slots',
    );
    const retry = settled(gc.writeUsers(part([row('locked@x.co')]), 'ignore'));
    const later = settled(gc.writeUsers(part([row('later@x.co')]), 'ignore'));
    await w.finish('group');
    assert.equal(
      (await later).status,
      'fulfilled',
      'a request for another email is written while the slow lane waits',
    );
    assert.deepEqual(
      w.writes.map((x) => x.kind),
      ['slow'],
      'the retry waits behind the request for its email',
    );
    for (const r of await Promise.all([opener, ...others])) assert.equal(r.status, 'fulfilled');
    await w.finish('slow');
    assert.equal(
      (await lockedOne).status,
      'fulfilled',
      'the row was let go within the full lock timeout',
    );
    await finishEverything(w);
    assert.equal((await retry).status, 'fulfilled');
  });

  test('with the slow lane full, a locked-out request gets its lock_timeout (503) at once', async () => {
    const w = scriptedWriter({
      failGroup: (rows) => (locked(rows) ? lockTimeout : undefined),
      failAlone: locked,
    });
    const gc = groupCommit(w, { maxSlow: 0, diagnosis: 'lock_timeout' });
    const lockedOne = settled(gc.writeUsers(part([row('locked@x.co')]), 'ignore'));
    /** @type {string[]} */ const kinds = [];
    for (let i = 0; i < 10 && w.writes.length > 0; i++) {
      kinds.push(...w.writes.map((x) => x.kind));
      await w.finishAll();
    }
    assert.deepEqual(kinds, ['group', 'alone'], 'never the slow lane');
    const result = await lockedOne;
    assert.ok(result.status === 'rejected' && result.reason === lockedOut, JSON.stringify(result));
  });

  test('a group locked out because the whole table is locked: every request gets lock_timeout, none is written alone', async () => {
    const w = scriptedWriter({ failGroup: () => lockTimeout });
    const gc = groupCommit(w, { diagnosis: 'lock_timeout', tableLocked: true });
    const all = [1, 2, 3].map((i) => settled(gc.writeUsers(part([row(`${i}@x.co`)]), 'ignore')));
    /** @type {string[]} */ const kinds = [];
    for (let i = 0; i < 10 && w.writes.length > 0; i++) {
      kinds.push(...w.writes.map((x) => x.kind));
      await w.finishAll();
    }
    for (const r of await Promise.all(all))
      assert.ok(
        r.status === 'rejected' &&
          r.reason instanceof DatabaseTimeoutError &&
          r.reason.code === 'lock_timeout',
      );
    assert.deepEqual(kinds, ['group', 'group']);
  });

  test('a group whose statement timed out: every request gets statement_timeout (503)', async () => {
    const timedOut = Object.assign(new Error('canceling statement due to statement timeout'), {
      code: '57014',
    });
    const w = scriptedWriter({ failGroup: () => timedOut });
    const gc = groupCommit(w, { diagnosis: 'statement_timeout' });
    const all = [1, 2].map((i) => settled(gc.writeUsers(part([row(`${i}@x.co`)]), 'ignore')));
    await finishEverything(w);
    for (const r of await Promise.all(all))
      assert.ok(
        r.status === 'rejected' &&
          r.reason instanceof DatabaseTimeoutError &&
          r.reason.code === 'statement_timeout',
      );
  });
});

describe('credit (unit)', () => {
  test('a request gets the inserts and updates of its own emails', () => {
    const written = new Map([
      ['a@x.co', true],
      ['b@x.co', false],
      ['c@x.co', true],
    ]);
    assert.deepEqual(credit([row('a@x.co'), row('b@x.co'), row('d@x.co')], written), {
      inserted: 1,
      updated: 1,
    });
    assert.deepEqual(credit([row('a@x.co'), row('z@x.co')], 'all'), { inserted: 2, updated: 0 });
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

describe('group commit and return=representation (unit)', () => {
  /** @param {string} email @param {boolean} inserted */
  const written = (email, inserted) => ({
    email,
    name: 'N',
    phone: null,
    createdAt: '2026-01-01T00:00:00+00:00',
    updatedAt: inserted ? null : '2026-01-02T00:00:00+00:00',
    inserted,
  });

  test('a group with a request that wants its rows asks the statement for them; each request gets exactly its own', async () => {
    /** @type {{ emails: string[], withRows: boolean | undefined }[]} */
    const calls = [];
    /** @type {(() => void) | undefined} */
    let release;
    const gate = new Promise((r) => {
      release = () => r(undefined);
    });
    const gc = createGroupCommit({
      /** @param {import('../../src/users/user-writer.js').WriteRequest} request */
      async write({ kind, rows, parts = [] }) {
        if (kind !== 'group') assert.fail('no request is written alone');
        const withRows = parts.some((p) => p.withRows);
        // As the writer asks it: withRows only when a request wants them.
        calls.push({ emails: rows.map((r) => r.email), withRows: withRows || undefined });
        await gate;
        if (!withRows) return parts.map((p) => credit(p.rows, 'all'));
        const map = new Map(
          rows
            .filter((r) => r.email !== 'c@x.co')
            .map((r) => [r.email, written(r.email, r.email !== 'b@x.co')]),
        );
        return parts.map((p) => credit(p.rows, map, p.withRows));
      },
      policy: createWritePolicy({ diagnose: async () => 'own' }),
      maxRows: 1000,
      maxInFlight: 1,
    });
    const first = gc.writeUsers(part([row('z@x.co')]), 'merge');
    const withRows = gc.writeUsers(
      { ...part([row('a@x.co'), row('b@x.co')]), withRows: true },
      'merge',
    );
    const counts = gc.writeUsers(part([row('c@x.co'), row('d@x.co')]), 'merge');
    /** @type {() => void} */ (release)();
    assert.deepEqual(
      await first,
      { inserted: 1, updated: 0 },
      'a group of counts alone pays for no rows',
    );
    const rowsAnswer = await withRows;
    assert.deepEqual(calls, [
      { emails: ['z@x.co'], withRows: undefined },
      { emails: ['a@x.co', 'b@x.co', 'c@x.co', 'd@x.co'], withRows: true },
    ]);
    assert.deepEqual(rowsAnswer, {
      inserted: 1,
      updated: 1,
      users: [written('a@x.co', true), written('b@x.co', false)],
    });
    assert.deepEqual(
      await counts,
      { inserted: 1, updated: 0 },
      'c was not written (unchanged), d inserted; no rows',
    );
  });

  test('a request of a failed group is written alone still asking for its rows', async () => {
    /** @type {unknown[]} */
    const aloneOptions = [];
    const gc = createGroupCommit({
      /** @param {import('../../src/users/user-writer.js').WriteRequest} request */
      async write({ kind, rows, parts }) {
        if (kind === 'group') throw Object.assign(new Error('poisoned row'), { code: '22000' });
        const withRows = parts[0].withRows;
        aloneOptions.push(withRows ? { withRows } : undefined);
        return [
          {
            inserted: rows.length,
            updated: 0,
            ...(withRows ? { users: rows.map((r) => written(r.email, true)) } : {}),
          },
        ];
      },
      policy: createWritePolicy({ diagnose: async () => 'own' }),
      maxRows: 1000,
    });
    const [a, b] = await Promise.all([
      gc.writeUsers({ ...part([row('a@x.co')]), withRows: true }, 'ignore'),
      gc.writeUsers(part([row('b@x.co')]), 'ignore'),
    ]);
    assert.deepEqual(a.users, [written('a@x.co', true)]);
    assert.equal(b.users, undefined);
    assert.deepEqual(aloneOptions.map((o) => /** @type {any} */ (o)?.withRows === true).sort(), [
      false,
      true,
    ]);
  });

  test("credit: the rows of a request out of a statement's rows, counted by how each was written", () => {
    const map = new Map([
      ['a@x.co', written('a@x.co', true)],
      ['b@x.co', written('b@x.co', false)],
      ['z@x.co', written('z@x.co', true)],
    ]);
    assert.deepEqual(credit([row('a@x.co'), row('b@x.co'), row('c@x.co')], map, true), {
      inserted: 1,
      updated: 1,
      users: [written('a@x.co', true), written('b@x.co', false)],
    });
    assert.deepEqual(credit([row('a@x.co'), row('c@x.co')], map), { inserted: 1, updated: 0 });
  });
});
