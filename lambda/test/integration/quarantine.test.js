// The feeder with its default INVALID_USERS=quarantine, through ElasticMQ to the real service and
// PostgreSQL: a message whose users are partly invalid is no longer failed (its good users stored,
// its bad ones set aside by the service, the message deleted); a message that is not JSON still
// goes to the dead-letter queue alone.
import assert from 'node:assert/strict';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { after, describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { SAMPLE_HASH, uniqueTag } from '../../../test/support/users.js';
import { startFeeder } from '../support/pipeline.js';
import { createQueuePair, makeSqsClient, waitUntil } from '../support/queues.js';

/** Invalid users of every kind the validator refuses, a plaintext password among them. */
const BAD_USERS = [
  (/** @type {string} */ email) => ({ email: email.replace('@', ''), name: 'No at sign' }),
  (/** @type {string} */ email) => ({ email, name: '' }),
  (/** @type {string} */ email) => ({ email, name: 'Plain', password: 'hunter2-never-kept' }),
  (/** @type {string} */ email) => ({ email, name: 'Nul', passwordHash: `${SAMPLE_HASH}\u0000` }),
  (/** @type {string} */ email) => ({ email, nmae: 'Typo' }),
];

describe('the feeder sets invalid users aside (INVALID_USERS=quarantine, the default)', () => {
  const sqs = makeSqsClient();
  const ctx = useAppAndDatabase({ LOG_LEVEL: 'warn' });
  after(() => sqs.destroy());

  test('20,000 users with 50 invalid spread over 200 messages: 19,950 stored, 50 set aside, only the messages not JSON in the DLQ', async (t) => {
    // Long enough for a batch of 100 messages of 100 users: a message comes back only when its handler failed it.
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 10, maxReceiveCount: 2 });
    t.after(() => queues.delete());
    const tag = uniqueTag();
    let bad = 0;
    const bodies = Array.from({ length: 200 }, (_, m) =>
      JSON.stringify(
        Array.from({ length: 100 }, (_, u) => {
          const email = `q-${tag}-${m}-${u}@example.com`;
          // Every fourth message holds one invalid user, at a place of its own.
          if (m % 4 === 0 && u === (m * 7) % 100) return BAD_USERS[bad++ % BAD_USERS.length](email);
          return { email, name: `Q ${m}.${u}` };
        }),
      ),
    );
    assert.equal(bad, 50);
    const notJson = [`{"email": "broken-${tag}@example.com", "name": `, 'not json at all'];
    bodies.splice(50, 0, notJson[0]);
    bodies.splice(150, 0, notJson[1]);
    await queues.send(bodies);

    const feeder = await startFeeder({
      sqs,
      queueUrl: queues.queueUrl,
      serviceUrl: ctx.app.baseUrl,
    });
    t.after(feeder.stop);
    await waitUntil(
      async () =>
        (await queues.depth(queues.dlqUrl)) === 2 && (await queues.depth(queues.queueUrl)) === 0,
      'the 2 messages that are not JSON in the DLQ',
      120_000,
    );
    await feeder.stop();

    const stored = await ctx.db.pool.query(
      'SELECT count(*)::int AS n FROM users WHERE email LIKE $1',
      [`q-${tag}-%`],
    );
    assert.equal(stored.rows[0].n, 19_950, 'every valid user');
    const kept = await ctx.db.pool.query(
      'SELECT count(*)::int AS n, count(DISTINCT item)::int AS items FROM quarantined_items WHERE item LIKE $1',
      [`%q-${tag}-%`],
    );
    assert.deepEqual(kept.rows[0], { n: 50, items: 50 }, 'each invalid user set aside once');
    const clients = await ctx.db.pool.query(
      'SELECT DISTINCT client, format, reason FROM quarantined_items',
    );
    assert.deepEqual(clients.rows, [
      { client: 'anonymous', format: 'json', reason: 'invalid_user' },
    ]);
    const whole = await ctx.db.pool.query(
      "SELECT string_agg(item, E'\\n') AS all FROM quarantined_items",
    );
    assert.ok(!whole.rows[0].all.includes('hunter2-never-kept'), 'no plaintext password kept');

    const dlq = [];
    for (let i = 0; i < 10 && dlq.length < 2; i++) {
      const out = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queues.dlqUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
        }),
      );
      dlq.push(...(out.Messages ?? []).map((message) => message.Body));
    }
    assert.deepEqual(dlq.sort(), [...notJson].sort(), 'only the messages that are not JSON');
    const fed = feeder.handlerLogs.filter((l) => l.message === 'sqs batch fed');
    assert.equal(
      fed.reduce((sum, l) => sum + l.quarantined, 0),
      50,
      'the feeder counts what was set aside',
    );
    assert.ok(!JSON.stringify(feeder.handlerLogs).includes('hunter2'), 'nor logged by the feeder');
    assert.ok(!JSON.stringify(ctx.app.logs).includes('hunter2'), 'nor by the service');
  });
});
