import assert from 'node:assert/strict';
import { DeleteMessageBatchCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { after, describe, test } from 'node:test';
import { setEnv } from '../../../test/support/env.js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { lambdaContext, toLambdaRecord } from '../../local/sqs-event.js';
import { feederFromEnvironment } from '../../src/handler.js';
import { captureHandlerOutput } from '../support/handler-output.js';
import { createQueuePair, makeSqsClient } from '../support/queues.js';

// The feeder's Idempotency-Key per chunk, against ElasticMQ and the service on PostgreSQL: a batch
// SQS delivers again (the invocation that stored it never deleted it) sends the same keys, so its
// chunks get their first answers again: counted as replayed, not inserted twice.

describe("the feeder's key per chunk across a redelivery", () => {
  const sqs = makeSqsClient();
  const ctx = useAppAndDatabase({ LOG_LEVEL: 'warn' });
  after(() => sqs.destroy());

  test('a batch delivered again sends the same key per chunk: every chunk replayed, nothing counted twice', async (t) => {
    // 20 users a POST: the 30-user message is split across two chunks, each its own key.
    t.after(setEnv({ SERVICE_URL: ctx.app.baseUrl, POST_CHUNK_ITEMS: '20' }));
    const handler = feederFromEnvironment(process.env);
    const output = captureHandlerOutput();
    t.after(output.restore);
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 1, maxReceiveCount: 5 });
    const users = (/** @type {string} */ tag, /** @type {number} */ n) =>
      Array.from({ length: n }, (_, i) => ({
        email: `again-${tag}-${i}@example.com`,
        name: `Again ${i}`,
      }));
    await queues.send([
      JSON.stringify(users('a', 30)),
      JSON.stringify(users('b', 10)),
      JSON.stringify(users('c', 10)),
    ]);

    const receive = async () => {
      const messages = /** @type {import('@aws-sdk/client-sqs').Message[]} */ ([]);
      while (messages.length < 3) {
        const out = await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queues.queueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 5,
          }),
        );
        messages.push(...(out.Messages ?? []));
      }
      return messages;
    };
    const source = { queueArn: 'arn:aws:sqs:us-east-1:000000000000:q', region: 'us-east-1' };
    const first = await receive();
    assert.deepEqual(
      await handler(
        { Records: first.map((m) => toLambdaRecord(m, source)) },
        lambdaContext(10_000),
      ),
      { batchItemFailures: [] },
    );
    // Not deleted (the invocation's end was lost): visible again after 1 s, the same batch.
    const again = await receive();
    const order = first.map((m) => m.MessageId);
    again.sort((a, b) => order.indexOf(a.MessageId) - order.indexOf(b.MessageId));
    assert.deepEqual(
      again.map((m) => m.MessageId),
      order,
    );
    assert.deepEqual(
      await handler(
        { Records: again.map((m) => toLambdaRecord(m, source)) },
        lambdaContext(10_000),
      ),
      { batchItemFailures: [] },
    );

    assert.equal(await ctx.db.countUsers(), 50);
    const [stored, replayed] = output.logs;
    assert.deepEqual([stored.usersStored, stored.inserted, stored.usersReplayed], [50, 50, 0]);
    assert.deepEqual(
      [replayed.usersStored, replayed.inserted, replayed.usersReplayed],
      [50, 0, 50],
      'every chunk got its first answer again',
    );
    const { rows } = await ctx.db.pool.query(
      "SELECT key FROM idempotency_keys WHERE key LIKE 'sqs-%'",
    );
    assert.equal(rows.length, 3, 'three chunks (20, 20, 10 users), one key each, stored once');
    await sqs.send(
      new DeleteMessageBatchCommand({
        QueueUrl: queues.queueUrl,
        Entries: again.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle })),
      }),
    );
    await queues.delete();
  });
});
