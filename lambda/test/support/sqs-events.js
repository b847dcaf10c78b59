import { randomUUID } from 'node:crypto';
import { lambdaContext, toLambdaRecord } from '../../local/sqs-event.js';

const SOURCE = { queueArn: 'arn:aws:sqs:us-east-1:000000000000:sluice-users', region: 'us-east-1' };
let sequence = 0;

/**
 * An SQS record as Lambda delivers it, from a body (a string is used as it is; anything else is
 * serialised as JSON). With a group, the record of a FIFO queue's message of that group.
 * @param {unknown} body
 * @param {{ messageId?: string, receiveCount?: number, group?: string }} [options]
 */
export function makeRecord(body, { messageId = randomUUID(), receiveCount = 1, group } = {}) {
  const fifo =
    group === undefined
      ? {}
      : {
          MessageGroupId: group,
          MessageDeduplicationId: `dedup-${messageId}`,
          SequenceNumber: String(++sequence),
        };
  return toLambdaRecord(
    {
      MessageId: messageId,
      ReceiptHandle: `handle-${messageId}`,
      Body: typeof body === 'string' ? body : JSON.stringify(body),
      Attributes: { ApproximateReceiveCount: String(receiveCount), ...fifo },
    },
    SOURCE,
  );
}

/** @param {unknown[]} bodies */
export const makeEvent = (bodies) => ({ Records: bodies.map((b) => makeRecord(b)) });

export { lambdaContext };
