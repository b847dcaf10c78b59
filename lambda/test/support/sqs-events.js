import { randomUUID } from 'node:crypto';
import { lambdaContext, toLambdaRecord } from '../../local/sqs-event.js';

const SOURCE = { queueArn: 'arn:aws:sqs:us-east-1:000000000000:sluice-users', region: 'us-east-1' };

/**
 * An SQS record as Lambda delivers it, from a body (a string is used as it is; anything else is
 * serialised as JSON).
 * @param {unknown} body
 * @param {{ messageId?: string, receiveCount?: number }} [options]
 */
export function makeRecord(body, { messageId = randomUUID(), receiveCount = 1 } = {}) {
  return toLambdaRecord(
    {
      MessageId: messageId,
      ReceiptHandle: `handle-${messageId}`,
      Body: typeof body === 'string' ? body : JSON.stringify(body),
      Attributes: { ApproximateReceiveCount: String(receiveCount) },
    },
    SOURCE,
  );
}

/** @param {unknown[]} bodies */
export const makeEvent = (bodies) => ({ Records: bodies.map((b) => makeRecord(b)) });

export { lambdaContext };
