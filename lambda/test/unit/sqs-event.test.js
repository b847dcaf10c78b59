import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import { lambdaContext, toLambdaRecord } from '../../local/sqs-event.js';

const SOURCE = { queueArn: 'arn:aws:sqs:eu-west-1:123456789012:sluice-users', region: 'eu-west-1' };

describe('toLambdaRecord (unit)', () => {
  test("a received message becomes the record Lambda's SQS event source delivers", () => {
    const record = toLambdaRecord(
      {
        MessageId: 'm-1',
        ReceiptHandle: 'rh-1',
        Body: '[{"email":"a@x.io","name":"A"}]',
        MD5OfBody: 'd41d8cd98f00b204e9800998ecf8427e',
        Attributes: {
          ApproximateReceiveCount: '3',
          SentTimestamp: '1700000000000',
          SenderId: 'AIDA123',
          ApproximateFirstReceiveTimestamp: '1700000000500',
        },
        MessageAttributes: {
          resolution: { DataType: 'String', StringValue: 'merge' },
          blob: { DataType: 'Binary', BinaryValue: Uint8Array.from([0xde, 0xad, 0xbe, 0xef]) },
        },
      },
      SOURCE,
    );
    assert.deepEqual(record, {
      messageId: 'm-1',
      receiptHandle: 'rh-1',
      body: '[{"email":"a@x.io","name":"A"}]',
      attributes: {
        ApproximateReceiveCount: '3',
        SentTimestamp: '1700000000000',
        SenderId: 'AIDA123',
        ApproximateFirstReceiveTimestamp: '1700000000500',
      },
      messageAttributes: {
        resolution: {
          stringValue: 'merge',
          binaryValue: undefined,
          stringListValues: [],
          binaryListValues: [],
          dataType: 'String',
        },
        blob: {
          stringValue: undefined,
          binaryValue: '3q2+7w==',
          stringListValues: [],
          binaryListValues: [],
          dataType: 'Binary',
        },
      },
      md5OfBody: 'd41d8cd98f00b204e9800998ecf8427e',
      eventSource: 'aws:sqs',
      eventSourceARN: SOURCE.queueArn,
      awsRegion: 'eu-west-1',
    });
  });

  test("a FIFO queue's message: its group, deduplication id and sequence number, where Lambda puts them", () => {
    const record = toLambdaRecord(
      {
        MessageId: 'm-3',
        ReceiptHandle: 'rh-3',
        Body: '{}',
        Attributes: {
          ApproximateReceiveCount: '1',
          SentTimestamp: '1700000000000',
          SenderId: 'AIDA123',
          ApproximateFirstReceiveTimestamp: '1700000000500',
          SequenceNumber: '18849496460467696128',
          MessageGroupId: 'users-07',
          MessageDeduplicationId: 'run-1-42',
        },
      },
      { queueArn: 'arn:aws:sqs:eu-west-1:123456789012:sluice-users.fifo', region: 'eu-west-1' },
    );
    assert.deepEqual(record.attributes, {
      ApproximateReceiveCount: '1',
      SentTimestamp: '1700000000000',
      SenderId: 'AIDA123',
      ApproximateFirstReceiveTimestamp: '1700000000500',
      SequenceNumber: '18849496460467696128',
      MessageGroupId: 'users-07',
      MessageDeduplicationId: 'run-1-42',
    });
  });

  describe('with the clock stopped', () => {
    beforeEach(() => mock.timers.enable({ apis: ['Date'], now: 1_700_000_000_000 }));
    afterEach(() => mock.timers.reset());

    test('what an emulator leaves out gets a default: first receive, sent and received now, an empty body', () => {
      const record = toLambdaRecord({ MessageId: 'm-2', ReceiptHandle: 'rh-2' }, SOURCE);
      assert.equal(record.body, '');
      assert.equal(record.md5OfBody, '');
      assert.deepEqual(record.messageAttributes, {});
      assert.deepEqual(record.attributes, {
        ApproximateReceiveCount: '1',
        SentTimestamp: '1700000000000',
        SenderId: '000000000000',
        ApproximateFirstReceiveTimestamp: '1700000000000',
      });
    });

    test('lambdaContext counts the time left down from the timeout, and stops at 0', () => {
      const context = lambdaContext(5_000, 'req-1');
      assert.equal(context.awsRequestId, 'req-1');
      assert.equal(context.getRemainingTimeInMillis(), 5_000);
      mock.timers.tick(1_250);
      assert.equal(context.getRemainingTimeInMillis(), 3_750);
      mock.timers.tick(10_000);
      assert.equal(context.getRemainingTimeInMillis(), 0);
    });
  });

  test('each context has a request id of its own unless one is given', () => {
    assert.notEqual(lambdaContext(1000).awsRequestId, lambdaContext(1000).awsRequestId);
  });
});
