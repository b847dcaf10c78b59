import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadFeederConfig } from '../../src/config.js';
import { feedRecords } from '../../src/feed-records.js';
import { makeRecord } from '../support/sqs-events.js';

// The Idempotency-Key of each chunk: the same for the same users of the same messages (a batch
// delivered again), another for any other set (a split chunk, another resolution, other messages).

const config = loadFeederConfig({ SERVICE_URL: 'http://sluice.test', POST_CHUNK_ITEMS: '3' });
const user = (/** @type {string} */ m, /** @type {number} */ i) => ({
  email: `${m}-${i}@x.io`,
  name: 'U',
});
const records = [
  makeRecord(JSON.stringify([user('a', 0), user('a', 1)]), { messageId: 'm-a' }),
  makeRecord(JSON.stringify([user('b', 0), user('b', 1), user('b', 2)]), { messageId: 'm-b' }),
];

/**
 * The keys the chunks of `batch` were posted with, with a scripted answer.
 * @param {import('../../src/records.js').SqsRecordLike[]} batch @param {(users: unknown[]) => import('../../src/service-client.js').PostOutcome} [answer]
 */
async function keysOf(
  batch,
  answer = () => ({ kind: 'stored', inserted: 0, updated: 0, stale: 0 }),
) {
  const posts = /** @type {{ key: string | undefined, users: unknown[] }[]} */ ([]);
  await feedRecords(batch, {
    config,
    deadline: Date.now() + 10_000,
    postBatch: async (_config, users, { idempotencyKey }) => {
      posts.push({ key: idempotencyKey, users });
      return answer(users);
    },
  });
  return posts;
}

describe('chunkKey (unit)', () => {
  test('a batch delivered again posts the same keys; each chunk its own', async () => {
    const first = await keysOf(records);
    const again = await keysOf(
      records.map((r) => ({ ...r, attributes: { ...r.attributes, ApproximateReceiveCount: '2' } })),
    );
    assert.equal(first.length, 2);
    assert.deepEqual(
      again.map((p) => p.key),
      first.map((p) => p.key),
    );
    assert.notEqual(first[0].key, first[1].key);
    for (const { key } of first) assert.match(String(key), /^sqs-[\w-]{43}$/);
  });

  test('other users of the same messages, another resolution, or a split chunk: other keys', async () => {
    const [ab, bb] = await keysOf(records);
    const [merged] = await keysOf(
      records.map((r) => ({
        ...r,
        messageAttributes: { resolution: { stringValue: 'merge-duplicates', dataType: 'String' } },
      })),
    );
    assert.notEqual(merged.key, ab.key);
    // The first chunk (a0, a1, b0) refused for b0: what is posted again without m-b is another set.
    const split = await keysOf(records, (users) =>
      users.length === 3 && /** @type {any} */ (users[2]).email === 'b-0@x.io'
        ? { kind: 'invalid', errors: [{ index: 2, field: 'email', message: 'bad' }] }
        : { kind: 'stored', inserted: 0, updated: 0, stale: 0 },
    );
    // m-b failed as poison: the first chunk goes again with a0 and a1 only, another set of users.
    const again = split.find(
      (p) =>
        p.users.length === 2 && p.users.every((u) => /** @type {any} */ (u).email.startsWith('a-')),
    );
    assert.ok(again, JSON.stringify(split));
    assert.equal(split[0].key, ab.key);
    assert.notEqual(again.key, ab.key, 'another set of users, another key');
    assert.notEqual(again.key, bb.key);
  });
});
