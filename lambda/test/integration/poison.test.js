import assert from 'node:assert/strict';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { after, describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { startFeeder } from '../support/pipeline.js';
import { createQueuePair, makeSqsClient, waitUntil } from '../support/queues.js';

describe('poison messages', () => {
  const sqs = makeSqsClient();
  const ctx = useAppAndDatabase({ LOG_LEVEL: 'warn' });
  after(() => sqs.destroy());

  test('10 malformed messages among 10,000 good ones: every good user stored, only the 10 in the DLQ', async (t) => {
    // A short visibility timeout, so the poison reappears (and reaches maxReceiveCount) quickly.
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 1, maxReceiveCount: 3 });
    const good = Array.from({ length: 10_000 }, (_, i) => JSON.stringify({ email: `good-${i}@example.com`, name: `Good ${i}` }));
    const poison = [
      ...Array.from({ length: 5 }, (_, i) => `{"email": "broken-${i}@example.com", "name": `),
      ...Array.from({ length: 5 }, (_, i) => JSON.stringify([{ email: `fine-${i}@example.com`, name: 'Fine' }, { email: `not-an-email-${i}`, name: 'Bad' }])),
    ];
    const bodies = [...good];
    poison.forEach((p, i) => bodies.splice((i + 1) * 900, 0, p));
    await queues.send(bodies);

    const { stop } = await startFeeder({ sqs, queueUrl: queues.queueUrl, serviceUrl: ctx.app.baseUrl });
    t.after(stop);
    await waitUntil(async () => (await queues.depth(queues.dlqUrl)) === 10 && (await queues.depth(queues.queueUrl)) === 0, 'the 10 poison messages in the DLQ', 120_000);
    await stop();

    assert.equal(await ctx.db.countUsers(), 10_000, 'every good user, and no user of a poison message');
    const inDlq = [];
    for (let i = 0; i < 5 && inDlq.length < 10; i++) {
      const out = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queues.dlqUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
      inDlq.push(...(out.Messages ?? []).map((m) => m.Body));
    }
    assert.deepEqual(inDlq.sort(), [...poison].sort());
    await queues.delete();
  });
});
