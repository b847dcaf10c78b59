import { randomBytes } from 'node:crypto';
import {
  CreateQueueCommand,
  DeleteQueueCommand,
  GetQueueAttributesCommand,
  SQSClient,
  SendMessageBatchCommand,
} from '@aws-sdk/client-sqs';

// The queue tests import it from here.
export { waitUntil } from '../../../test/support/wait.js';

export function sqsEndpoint() {
  const endpoint = process.env.SLUICE_TEST_SQS_ENDPOINT;
  if (!endpoint)
    throw new Error(
      'SLUICE_TEST_SQS_ENDPOINT is unset: run the tests with `npm test`, which starts ElasticMQ',
    );
  return endpoint;
}

export const makeSqsClient = () =>
  new SQSClient({
    endpoint: sqsEndpoint(),
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });

/** What template.yaml's QueueType Fifo sets on the queue (the dead-letter queue takes the first). */
const FIFO_ATTRIBUTES = { FifoQueue: 'true' };
const FIFO_QUEUE_ATTRIBUTES = {
  ...FIFO_ATTRIBUTES,
  ContentBasedDeduplication: 'false',
  DeduplicationScope: 'messageGroup',
  FifoThroughputLimit: 'perMessageGroupId',
};

/**
 * A queue and its dead-letter queue, of this test's own: standard, or both FIFO (named `.fifo`).
 * @param {import('@aws-sdk/client-sqs').SQSClient} sqs
 * @param {{ visibilityTimeoutSeconds: number, maxReceiveCount: number, fifo?: boolean }} options
 */
export async function createQueuePair(
  sqs,
  { visibilityTimeoutSeconds, maxReceiveCount, fifo = false },
) {
  const name = `t-${randomBytes(5).toString('hex')}`;
  const suffix = fifo ? '.fifo' : '';
  const dlq = await sqs.send(
    new CreateQueueCommand({
      QueueName: `${name}-dlq${suffix}`,
      Attributes: fifo ? FIFO_ATTRIBUTES : undefined,
    }),
  );
  const dlqArn = (
    await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: dlq.QueueUrl, AttributeNames: ['QueueArn'] }),
    )
  ).Attributes?.QueueArn;
  const queue = await sqs.send(
    new CreateQueueCommand({
      QueueName: `${name}${suffix}`,
      Attributes: {
        VisibilityTimeout: String(visibilityTimeoutSeconds),
        RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount }),
        ...(fifo ? FIFO_QUEUE_ATTRIBUTES : {}),
      },
    }),
  );
  const queueUrl = /** @type {string} */ (queue.QueueUrl);
  const dlqUrl = /** @type {string} */ (dlq.QueueUrl);

  /** @param {string} url visible + in flight + delayed */
  const depth = async (url) => {
    const a =
      (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] })))
        .Attributes ?? {};
    return (
      Number(a.ApproximateNumberOfMessages ?? 0) +
      Number(a.ApproximateNumberOfMessagesNotVisible ?? 0) +
      Number(a.ApproximateNumberOfMessagesDelayed ?? 0)
    );
  };
  return {
    queueUrl,
    dlqUrl,
    depth,
    /** @param {string[]} bodies */
    async send(bodies) {
      for (let i = 0; i < bodies.length; i += 10) {
        const out = await sqs.send(
          new SendMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: bodies
              .slice(i, i + 10)
              .map((MessageBody, n) => ({ Id: String(n), MessageBody })),
          }),
        );
        if (out.Failed?.length) throw new Error(`send failed: ${JSON.stringify(out.Failed)}`);
      }
    },
    async delete() {
      await sqs.send(new DeleteQueueCommand({ QueueUrl: queueUrl })).catch(() => {});
      await sqs.send(new DeleteQueueCommand({ QueueUrl: dlqUrl })).catch(() => {});
    },
  };
}
