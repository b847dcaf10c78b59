// Ordered merges through the queue: a standard queue delivers in any order and the feeder
// retries what an outage refused, so an older change of a user can reach the service after a newer
// one. With changedAt on every change, merge mode keeps the newest whatever the order: three versions
// of 2,000 users, shuffled, 10 users a message, drained in merge mode while the service is
// restarted once mid-drain.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { freePort } from '@sluice/db/local-postgres';
import { createTestDatabase } from '../../../test/support/database.js';
import { startServerProcess } from '../../../test/support/server-process.js';
import { packMessages, sendMessages } from '../../local/producer.js';
import { startFeeder } from '../support/pipeline.js';
import { createQueuePair, makeSqsClient, waitUntil } from '../support/queues.js';

const USERS = 2000;
const VERSIONS = 3;

/** Version v of user i: its change happened v seconds after a base (and 123 µs), so a later version is newer. @param {number} i @param {number} v */
const version = (i, v) => ({
  email: `ordered-${i}@example.com`,
  name: `Ordered ${i} v${v}`,
  phone: `+1555${String(i * 10 + v).padStart(7, '0')}`,
  changedAt: new Date(Date.parse('2026-11-26T00:00:00Z') + v * 1000)
    .toISOString()
    .replace('Z', '123Z'), // 2026-11-26T00:00:0v.000123Z
});

describe('three versions of 2,000 users through a standard queue, out of order, the service restarted mid-drain', () => {
  const sqs = makeSqsClient();
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  before(async () => {
    db = await createTestDatabase();
  });
  after(async () => {
    await db.drop();
    sqs.destroy();
  });

  /** How many users hold their newest version. */
  const newest = async () =>
    (
      await db.pool.query(
        `SELECT count(*)::int AS n FROM users WHERE name LIKE '% v${VERSIONS}' AND changed_at = $1`,
        [version(0, VERSIONS).changedAt],
      )
    ).rows[0].n;

  test('after the drain every user holds its newest version; the dead-letter queue is empty', async (t) => {
    const port = String(await freePort());
    const env = { DATABASE_URL: db.url, PORT: port, LOG_LEVEL: 'warn' };
    let service = await startServerProcess(env);
    t.after(() => service.stop());
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 10, maxReceiveCount: 5 });
    t.after(() => queues.delete());

    const changes = [];
    for (let i = 0; i < USERS; i++) for (let v = 1; v <= VERSIONS; v++) changes.push(version(i, v));
    for (let i = changes.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [changes[i], changes[j]] = [changes[j], changes[i]];
    }
    const sent = await sendMessages({
      sqs,
      queueUrl: queues.queueUrl,
      messages: packMessages(changes, 10),
    });
    assert.deepEqual(
      { users: sent.users, messages: sent.messages },
      { users: USERS * VERSIONS, messages: (USERS * VERSIONS) / 10 },
    );

    // Small invocations, so the drain is still going when the service restarts.
    const { stop, handlerLogs } = await startFeeder({
      sqs,
      queueUrl: queues.queueUrl,
      serviceUrl: service.baseUrl,
      batchSize: 10,
      functionTimeoutMs: 4_000,
      env: { CONFLICT_RESOLUTION: 'merge' },
    });
    t.after(stop);
    await waitUntil(async () => (await db.countUsers()) >= 300, 'the drain to be under way');
    service.child.kill('SIGKILL');
    await service.exited;
    const atRestart = await db.countUsers();
    service = await startServerProcess(env);

    await waitUntil(
      async () => (await newest()) === USERS && (await queues.depth(queues.queueUrl)) === 0,
      'every user at its newest version and an empty queue',
      120_000,
    );
    await stop();

    assert.ok(atRestart < USERS, `the restart came mid-drain (${atRestart} users stored by then)`);
    const { rows } = await db.pool.query(
      `SELECT email, name, phone, to_char(changed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS changed_at FROM users ORDER BY email`,
    );
    assert.equal(rows.length, USERS);
    for (const r of rows) {
      const i = Number(/ordered-(\d+)@/.exec(r.email)?.[1]);
      const expected = version(i, VERSIONS);
      assert.deepEqual(
        [r.name, r.phone, r.changed_at],
        [expected.name, expected.phone, expected.changedAt],
        'to the microsecond',
      );
    }
    assert.equal(await queues.depth(queues.dlqUrl), 0);
    // The feeder's counts: every change received was inserted, updated or counted stale.
    const stale = handlerLogs.reduce((n, l) => n + (l.stale ?? 0), 0);
    const written = handlerLogs.reduce((n, l) => n + (l.inserted ?? 0) + (l.updated ?? 0), 0);
    assert.ok(stale > 0, 'older versions arrived after newer ones and were counted stale');
    assert.ok(
      written + stale >= USERS * VERSIONS,
      `inserted + updated + stale (${written + stale}) covers every change sent`,
    );
  });
});
