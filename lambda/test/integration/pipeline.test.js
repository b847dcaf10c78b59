import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { packMessages, sendMessages } from '../../local/producer.js';
import { startFeeder } from '../support/pipeline.js';
import { createQueuePair, makeSqsClient, waitUntil } from '../support/queues.js';

describe('end to end: producer → queue → runner → handler → service → table', () => {
  const sqs = makeSqsClient();
  const ctx = useAppAndDatabase({ LOG_LEVEL: 'warn' });
  after(() => sqs.destroy());

  test('100,000 users, 100 per message: exactly 100,000 rows, every message deleted, queue and DLQ empty', async (t) => {
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 60, maxReceiveCount: 5 });
    const users = function* () {
      for (let i = 0; i < 100_000; i++) yield { email: `e2e-${i}@example.com`, name: `E2E ${i}` };
    };
    const sent = await sendMessages({
      sqs,
      queueUrl: queues.queueUrl,
      messages: packMessages(users(), 100),
      concurrency: 8,
    });
    assert.deepEqual(
      { users: sent.users, messages: sent.messages },
      { users: 100_000, messages: 1000 },
    );

    const { stop, logs } = await startFeeder({
      sqs,
      queueUrl: queues.queueUrl,
      serviceUrl: ctx.app.baseUrl,
    });
    t.after(stop);
    await waitUntil(
      async () =>
        (await ctx.db.countUsers()) >= 100_000 && (await queues.depth(queues.queueUrl)) === 0,
      '100,000 rows and an empty queue',
      120_000,
    );
    const totals = await stop();

    assert.equal(await ctx.db.countUsers(), 100_000);
    assert.equal(await queues.depth(queues.queueUrl), 0);
    assert.equal(await queues.depth(queues.dlqUrl), 0);
    assert.equal(totals.failed, 0);
    assert.equal(totals.deleted, 1000);
    assert.ok(logs.some((l) => l.msg === 'batch done'));
    await queues.delete();
  });
});
