import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { POISON_TRIGGER } from '../../../test/support/database.js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { uniqueTag } from '../../../test/support/users.js';
import { sendMessages } from '../../local/producer.js';
import { startFeeder } from '../support/pipeline.js';
import { createQueuePair, makeSqsClient, waitUntil } from '../support/queues.js';

describe('FIFO: producer → ElasticMQ FIFO queue → local runner → handler → service (merge mode) → table', () => {
  const sqs = makeSqsClient();
  const ctx = useAppAndDatabase({ LOG_LEVEL: 'warn' });
  after(() => sqs.destroy());

  test("a batch whose second message of a group fails reports it and the group's later messages, not the other groups'; after redelivery the final rows are the newest", async (t) => {
    const tag = uniqueTag();
    // Three groups; each message of a group holds a new version of the group's 20 users. A2 also
    // holds a user PostgreSQL refuses for now (a trigger: the service answers its own 500), until
    // the trigger is dropped: a failure that redelivery can get past.
    const versions = { A: 3, B: 2, C: 2 };
    const usersOf = (/** @type {string} */ group) =>
      Array.from({ length: 20 }, (_, u) => `${group.toLowerCase()}-${u}-${tag}@example.com`);
    const version = (/** @type {string} */ group, /** @type {number} */ v) =>
      usersOf(group).map((email) => ({ email, name: `${group} v${v}`, phone: `+1555000${v}` }));
    const poisonUser = { email: `refused-${tag}@example.com`, name: 'poison-XX000' };
    const messages = [
      ['A', 1],
      ['B', 1],
      ['A', 2],
      ['B', 2],
      ['A', 3],
      ['C', 1],
      ['C', 2],
    ].map(([group, v]) => {
      const users =
        group === 'A' && v === 2
          ? [...version(group, v), poisonUser]
          : version(/** @type {string} */ (group), /** @type {number} */ (v));
      return {
        body: JSON.stringify(users),
        users: users.length,
        group: /** @type {string} */ (group),
        label: `${group}${v}`,
      };
    });
    await ctx.db.pool.query(POISON_TRIGGER);

    const queues = await createQueuePair(sqs, {
      visibilityTimeoutSeconds: 2,
      maxReceiveCount: 5,
      fifo: true,
    });
    t.after(() => queues.delete());
    // Sent before the runner starts, so that one receive takes them all: one batch of 7, each group in order.
    async function* all() {
      yield* messages;
    }
    const sent = await sendMessages({ sqs, queueUrl: queues.queueUrl, messages: all() });
    assert.equal(sent.messages, 7);

    const feeder = await startFeeder({
      sqs,
      queueUrl: queues.queueUrl,
      serviceUrl: ctx.app.baseUrl,
      env: { CONFLICT_RESOLUTION: 'merge' },
    });
    t.after(feeder.stop);
    await waitUntil(
      async () => feeder.logs.some((l) => l.msg === 'batch done'),
      'the first batch handled',
      30_000,
    );

    // The first batch: all 7 messages; A2 failed (refused) and A3 is held behind it; B and C were stored whole.
    const first = feeder.logs.find((l) => l.msg === 'batch done');
    assert.deepEqual(
      { messages: first.messages, deleted: first.deleted, failed: first.failed },
      { messages: 7, deleted: 5, failed: 2 },
    );
    const warning = feeder.handlerLogs.find((l) => l.message === 'messages not stored');
    const received = feeder.handlerLogs.find((l) => l.message === 'sqs batch fed');
    assert.deepEqual(
      { records: received.records, poison: received.poisonMessages, held: received.heldMessages },
      { records: 7, poison: 1, held: 1 },
    );
    assert.deepEqual(warning.failures.map((/** @type {any} */ f) => f.kind).sort(), [
      'held',
      'poison',
    ]);
    assert.match(
      warning.failures.find((/** @type {any} */ f) => f.kind === 'held').reason,
      /an earlier message of its group failed/,
    );
    const rows = async (/** @type {string} */ group) =>
      (
        await ctx.db.pool.query(
          'SELECT name, phone FROM users WHERE email = ANY($1) ORDER BY email',
          [usersOf(group)],
        )
      ).rows;
    const onlyVersion = (/** @type {string} */ group, /** @type {number} */ v) =>
      Array(20).fill({ name: `${group} v${v}`, phone: `+1555000${v}` });
    assert.deepEqual(
      await rows('A'),
      onlyVersion('A', 1),
      'A stopped at A1: A3 was not applied before A2',
    );
    assert.deepEqual(await rows('B'), onlyVersion('B', 2));
    assert.deepEqual(await rows('C'), onlyVersion('C', 2));

    // The refusal is fixed; A2 and A3 come back (after their visibility timeout) in that order, and are stored.
    await ctx.db.pool.query('DROP TRIGGER refuse_poison ON users');
    await waitUntil(
      async () => (await queues.depth(queues.queueUrl)) === 0,
      'the queue drained',
      60_000,
    );
    const totals = await feeder.stop();

    for (const [group, newest] of Object.entries(versions))
      assert.deepEqual(
        await rows(group),
        onlyVersion(group, newest),
        `group ${group}: its newest version`,
      );
    assert.equal(
      (
        await ctx.db.pool.query('SELECT count(*)::int AS n FROM users WHERE email = $1', [
          poisonUser.email,
        ])
      ).rows[0].n,
      1,
    );
    assert.equal(await queues.depth(queues.dlqUrl), 0, 'nothing in the dead-letter queue');
    assert.equal(totals.deleted, 7);
    const redelivered = feeder.logs.filter((l) => l.msg === 'batch done').slice(1);
    assert.ok(
      redelivered.some((l) => l.messages === 2 && l.deleted === 2),
      `A2 and A3 came back together: ${JSON.stringify(redelivered)}`,
    );
  });
});
