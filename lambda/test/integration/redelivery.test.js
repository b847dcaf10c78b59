import assert from 'node:assert/strict';
import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { after, describe, test } from 'node:test';
import { setEnv } from '../../../test/support/env.js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { lambdaContext, toLambdaRecord } from '../../local/sqs-event.js';
import { feederFromEnvironment } from '../../src/handler.js';
import { captureHandlerOutput } from '../support/handler-output.js';
import { createQueuePair, makeSqsClient } from '../support/queues.js';

describe('redelivery', () => {
  const sqs = makeSqsClient();
  const ctx = useAppAndDatabase({ LOG_LEVEL: 'warn' });
  after(() => sqs.destroy());

  test('a message delivered twice (its visibility ran out mid-processing) stores its users once, counted once', async (t) => {
    t.after(setEnv({ SERVICE_URL: ctx.app.baseUrl }));
    const handler = feederFromEnvironment(process.env);
    const output = captureHandlerOutput();
    t.after(output.restore);
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 1, maxReceiveCount: 5 });
    const users = Array.from({ length: 50 }, (_, i) => ({
      email: `twice-${i}@example.com`,
      name: `Twice ${i}`,
    }));
    await queues.send([JSON.stringify(users)]);

    const receive = async () => {
      const out = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queues.queueUrl,
          MaxNumberOfMessages: 1,
          WaitTimeSeconds: 5,
          MessageSystemAttributeNames: ['All'],
        }),
      );
      assert.equal(out.Messages?.length, 1);
      return /** @type {import('@aws-sdk/client-sqs').Message} */ (out.Messages?.[0]);
    };
    const first = await receive();
    // The first invocation is "still working" when the visibility ends: the long poll of the second
    // receive returns as soon as the message is visible again (after 1 s).
    const second = await receive();
    assert.equal(second.MessageId, first.MessageId);
    assert.equal(second.Attributes?.ApproximateReceiveCount, '2');

    const source = { queueArn: 'arn:aws:sqs:us-east-1:000000000000:q', region: 'us-east-1' };
    const results = await Promise.all(
      [first, second].map((m) =>
        handler({ Records: [toLambdaRecord(m, source)] }, lambdaContext(10_000)),
      ),
    );
    assert.deepEqual(results, [{ batchItemFailures: [] }, { batchItemFailures: [] }]);
    assert.equal(await ctx.db.countUsers(), 50);
    assert.equal(
      output.logs.reduce((n, l) => n + l.inserted, 0),
      50,
      'the replay inserted nothing',
    );
    assert.deepEqual(
      output.logs.map((l) => l.usersStored),
      [50, 50],
      'both invocations saw every user stored',
    );
    await sqs.send(
      new DeleteMessageCommand({ QueueUrl: queues.queueUrl, ReceiptHandle: second.ReceiptHandle }),
    );
    await queues.delete();
  });
});
