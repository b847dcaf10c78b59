/**
 * One received SQS message in the exact record shape Lambda's SQS event source delivers.
 * @param {import('@aws-sdk/client-sqs').Message} message
 * @param {{ queueArn: string, region: string }} source
 */
export function toLambdaRecord(message, { queueArn, region }) {
  const attrs = message.Attributes ?? {};
  return {
    messageId: /** @type {string} */ (message.MessageId),
    receiptHandle: /** @type {string} */ (message.ReceiptHandle),
    body: message.Body ?? '',
    attributes: {
      ApproximateReceiveCount: attrs.ApproximateReceiveCount ?? '1',
      SentTimestamp: attrs.SentTimestamp ?? String(Date.now()),
      SenderId: attrs.SenderId ?? '000000000000',
      ApproximateFirstReceiveTimestamp:
        attrs.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
      // Present when the sender was traced by X-Ray, as in Lambda's records.
      ...(attrs.AWSTraceHeader ? { AWSTraceHeader: attrs.AWSTraceHeader } : {}),
      // A FIFO queue's records carry their group, deduplication id and sequence number, as in Lambda's.
      ...(attrs.MessageGroupId === undefined
        ? {}
        : {
            SequenceNumber: attrs.SequenceNumber ?? '',
            MessageGroupId: attrs.MessageGroupId,
            MessageDeduplicationId: attrs.MessageDeduplicationId ?? '',
          }),
    },
    messageAttributes: Object.fromEntries(
      Object.entries(message.MessageAttributes ?? {}).map(([name, a]) => [
        name,
        {
          stringValue: a.StringValue,
          binaryValue: a.BinaryValue ? Buffer.from(a.BinaryValue).toString('base64') : undefined,
          stringListValues: a.StringListValues ?? [],
          binaryListValues: (a.BinaryListValues ?? []).map((b) =>
            Buffer.from(b).toString('base64'),
          ),
          dataType: a.DataType,
        },
      ]),
    ),
    md5OfBody: message.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: region,
  };
}

/** @typedef {ReturnType<typeof toLambdaRecord>} SqsRecord */

/**
 * A Lambda context as far as the handler uses it: the time left before `timeoutMs` runs out.
 * @param {number} timeoutMs
 * @param {string} [requestId]
 */
export function lambdaContext(timeoutMs, requestId = crypto.randomUUID()) {
  const deadline = Date.now() + timeoutMs;
  return {
    awsRequestId: requestId,
    functionName: 'sluice-feeder-local',
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
  };
}
