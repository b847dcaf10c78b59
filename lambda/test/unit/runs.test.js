import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { chunksOf, runsOf } from '../../src/chunks.js';
import { loadFeederConfig } from '../../src/config.js';
import { feedRecords } from '../../src/feed-records.js';
import { unpackRecords } from '../../src/records.js';
import { makeRecord } from '../support/sqs-events.js';

// A batch is applied as consecutive runs of one operation, in record order, each run whole before
// the next starts; on a FIFO queue a failed message holds its group's later ones, across runs.

/** @typedef {import('../../src/service-client.js').PostOutcome} PostOutcome */

const user = (/** @type {string} */ tag) => ({ email: `${tag}@example.com`, name: tag });
/** An erase message's record. @param {unknown} body @param {{ group?: string }} [options] */
const eraseRecord = (body, options) => ({
  ...makeRecord(JSON.stringify(body), options),
  messageAttributes: { operation: { stringValue: 'erase', dataType: 'String' } },
});
/** @param {unknown[]} items @returns {PostOutcome} */
const taken = (items) => ({
  kind: 'stored',
  inserted: items.length,
  updated: 0,
  stale: 0,
  quarantined: 0,
});

/**
 * feedRecords with a poster in place of the service that keeps each post's path and what it
 * held, when it started and when it ended; `answer` may take its time.
 * @param {import('../../src/records.js').SqsRecordLike[]} records
 * @param {{ env?: Record<string, string>,
 *   answer?: (path: string, items: any[]) => PostOutcome | Promise<PostOutcome> }} [options]
 */
async function feed(records, { env = {}, answer = (_path, items) => taken(items) } = {}) {
  const config = loadFeederConfig({ SERVICE_URL: 'http://sluice.test', ...env });
  /** @type {{ path: string, items: any[] }[]} */
  const posts = [];
  /** @type {string[]} */
  const events = [];
  /** @type {[number, string][]} */
  const refusals = [];
  const fed = await feedRecords(records, {
    config,
    deadline: Date.now() + 10_000,
    postBatch: async (_config, items, options) => {
      const n = posts.push({ path: String(options.path), items });
      events.push(`start ${n}`);
      options.onAttempt?.(false);
      const outcome = await answer(String(options.path), items);
      events.push(`end ${n}`);
      return outcome;
    },
    credentialsRefused: (status, operation) => void refusals.push([status, operation]),
  });
  const failed = Object.fromEntries([...fed.failed].map(([id, f]) => [id, f.kind]));
  return { fed, posts, events, refusals, failed };
}

/** @param {number} ms */
const later = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

describe('runsOf (unit)', () => {
  test('a batch of upserts only is one run: the items themselves, cut into chunks as before', () => {
    const { items } = unpackRecords([makeRecord([user('a'), user('b')]), makeRecord(user('c'))]);
    const runs = runsOf(items);
    assert.equal(runs.length, 1);
    assert.equal(runs[0], items, 'the same array, not a copy');
    assert.deepEqual(chunksOf(runs[0], 2, false), [items.slice(0, 2), items.slice(2)]);
  });

  test('consecutive items of one operation make a run, in record order', () => {
    const records = [
      makeRecord([user('u1'), user('u2')]),
      eraseRecord(['e1@example.com', 'e2@example.com']),
      eraseRecord('e3@example.com'),
      makeRecord(user('u3')),
      eraseRecord({ email: 'e4@example.com' }),
    ];
    const runs = runsOf(unpackRecords(records).items);
    assert.deepEqual(
      runs.map((run) => [run[0].operation, run.map((i) => /** @type {any} */ (i.user).email)]),
      [
        ['upsert', ['u1@example.com', 'u2@example.com']],
        ['erase', ['e1@example.com', 'e2@example.com', 'e3@example.com']],
        ['upsert', ['u3@example.com']],
        ['erase', ['e4@example.com']],
      ],
    );
    assert.deepEqual(runsOf([]), []);
  });

  test('any sequence: the runs put together are the items, each of one operation, neighbours of two', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom('upsert', 'erase'), { maxLength: 30 }), (ops) => {
        const items = ops.map((operation, i) => ({
          messageId: `m${i}`,
          operation: /** @type {'upsert' | 'erase'} */ (operation),
          user: {},
          resolution: /** @type {const} */ ('ignore'),
          invalid: /** @type {const} */ ('quarantine'),
        }));
        const runs = runsOf(items);
        assert.deepEqual(runs.flat(), items);
        for (const run of runs) assert.ok(run.every((i) => i.operation === run[0].operation));
        for (let r = 1; r < runs.length; r++)
          assert.notEqual(runs[r][0].operation, runs[r - 1][0].operation);
      }),
    );
  });
});

describe('feedRecords: runs of upserts and erasures (unit, scripted poster)', () => {
  test('each run is posted whole before the next starts, even with posts in flight together', async () => {
    const records = [
      makeRecord([user('u1'), user('u2'), user('u3')]),
      eraseRecord(['e1@example.com', 'e2@example.com']),
      makeRecord([user('u4'), user('u5')]),
    ];
    const { posts, events, failed } = await feed(records, {
      env: { POST_CHUNK_ITEMS: '1', POST_CONCURRENCY: '4' },
      answer: async (_path, items) => (await later(5), taken(items)),
    });
    assert.deepEqual(failed, {});
    assert.deepEqual(
      posts.map((p) => p.path),
      ['/users', '/users', '/users', '/erasures', '/erasures', '/users', '/users'],
    );
    assert.deepEqual(
      events,
      [
        ...['start 1', 'start 2', 'start 3', 'end 1', 'end 2', 'end 3'],
        ...['start 4', 'start 5', 'end 4', 'end 5'],
        ...['start 6', 'start 7', 'end 6', 'end 7'],
      ],
      "a run's chunks go together; the next run waits for all of them",
    );
  });

  test("an erasure is posted as {email, changedAt?} to /erasures; the service's counts are kept", async () => {
    const records = [
      eraseRecord(['a@example.com', { email: 'b@example.com', changedAt: '2024-05-01T10:00:00Z' }]),
    ];
    const { posts, fed } = await feed(records, {
      answer: () => ({ ...taken([]), erased: 1, absent: 1 }),
    });
    assert.deepEqual(posts, [
      {
        path: '/erasures',
        items: [
          { email: 'a@example.com' },
          { email: 'b@example.com', changedAt: '2024-05-01T10:00:00Z' },
        ],
      },
    ]);
    assert.deepEqual({ users: fed.users, erasures: fed.erasures }, { users: 0, erasures: 2 });
    assert.deepEqual(
      [fed.stats.erasures, fed.stats.erased, fed.stats.absent, fed.stats.stored],
      [2, 1, 1, 0],
    );
  });

  test('a 400 naming an erasure fails its message alone; the rest of the chunk is posted again', async () => {
    const good = eraseRecord(['a@example.com']);
    const bad = eraseRecord(['b@example.com', { email: 'not-an-email' }]);
    const { posts, failed } = await feed([good, bad], {
      answer: (_path, items) =>
        items.some((e) => e.email === 'not-an-email')
          ? { kind: 'invalid', errors: [{ index: 2, field: 'email', message: 'x' }] }
          : taken(items),
    });
    assert.deepEqual(failed, { [bad.messageId]: 'poison' });
    assert.deepEqual(
      posts.map((p) => p.items.length),
      [3, 1],
    );
  });

  test('a 403 at /erasures fails every erase message of the chunk as unavailable, with one post; the upserts are stored', async () => {
    const upsert = makeRecord([user('u1')]);
    const erasures = [
      eraseRecord('a@example.com'),
      eraseRecord(['b@example.com', 'c@example.com']),
    ];
    const after = makeRecord(user('u2'));
    const { posts, failed, refusals } = await feed([upsert, ...erasures, after], {
      answer: (path, items) =>
        path === '/erasures'
          ? { kind: 'refused', status: 403, reason: 'HTTP 403 forbidden' }
          : taken(items),
    });
    assert.deepEqual(failed, {
      [erasures[0].messageId]: 'unavailable',
      [erasures[1].messageId]: 'unavailable',
    });
    assert.deepEqual(
      posts.map((p) => p.path),
      ['/users', '/erasures', '/users'],
      'not split: no message is at fault',
    );
    assert.deepEqual(refusals, [[403, 'erase']]);
  });

  describe('a FIFO batch', () => {
    test('upsert, erase, older upsert of one group: posted in that order', async () => {
      const records = [
        makeRecord({ ...user('a'), changedAt: '2024-05-02T00:00:00Z' }, { group: 'A' }),
        eraseRecord('a@example.com', { group: 'A' }),
        makeRecord({ ...user('a'), changedAt: '2024-05-01T00:00:00Z' }, { group: 'A' }),
      ];
      const { posts, failed } = await feed(records, { env: { POST_CONCURRENCY: '4' } });
      assert.deepEqual(failed, {});
      assert.deepEqual(
        posts.map((p) => [p.path, p.items[0].changedAt]),
        [
          ['/users', '2024-05-02T00:00:00Z'],
          ['/erasures', undefined],
          ['/users', '2024-05-01T00:00:00Z'],
        ],
      );
    });

    test("a failed upsert holds its group's later erasure, never posted; another group's goes", async () => {
      const a1 = makeRecord({ ...user('a1'), name: 'bad' }, { group: 'A' });
      const b1 = makeRecord(user('b1'), { group: 'B' });
      const a2 = eraseRecord('a1@example.com', { group: 'A' });
      const b2 = eraseRecord('b1@example.com', { group: 'B' });
      const { posts, failed } = await feed([a1, b1, a2, b2], {
        answer: (_path, items) => {
          const index = items.findIndex((u) => u.name === 'bad');
          return index >= 0
            ? { kind: 'invalid', errors: [{ index, field: 'name', message: 'x' }] }
            : taken(items);
        },
      });
      assert.deepEqual(failed, { [a1.messageId]: 'poison', [a2.messageId]: 'held' });
      assert.deepEqual(
        posts.map((p) => [p.path, p.items.map((i) => i.email)]),
        [
          ['/users', ['a1@example.com', 'b1@example.com']],
          ['/users', ['b1@example.com']],
          ['/erasures', ['b1@example.com']],
        ],
      );
    });

    test("an erasure refused (403) holds its group's later upsert: never applied after a failed erase", async () => {
      const a1 = eraseRecord('a@example.com', { group: 'A' });
      const b1 = eraseRecord('b@example.com', { group: 'B' });
      const a2 = makeRecord(user('a'), { group: 'A' });
      const c1 = makeRecord(user('c'), { group: 'C' });
      const { posts, failed } = await feed([a1, b1, a2, c1], {
        answer: (path, items) =>
          path === '/erasures'
            ? { kind: 'refused', status: 403, reason: 'HTTP 403 forbidden' }
            : taken(items),
      });
      assert.deepEqual(failed, {
        [a1.messageId]: 'unavailable',
        [b1.messageId]: 'unavailable',
        [a2.messageId]: 'held',
      });
      assert.deepEqual(
        posts.map((p) => [p.path, p.items.map((i) => i.email)]),
        [
          ['/erasures', ['a@example.com', 'b@example.com']],
          ['/users', ['c@example.com']],
        ],
      );
    });
  });
});
