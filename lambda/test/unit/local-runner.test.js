import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
} from '@aws-sdk/client-sqs';
import { LocalEventSource } from '../../local/local-runner.js';

const QUEUE_ARN = 'arn:aws:sqs:us-east-1:000000000000:sluice-users';

/**
 * An SQS stand-in holding `count` messages. A receive takes up to 10 of them; with none left it
 * waits, as a long poll does, for WaitTimeSeconds or for messages sent meanwhile (`send`), even
 * once the request is aborted (the answer then lost, as SQS's and ElasticMQ's are). What
 * the runner asked is recorded, for the tests to assert on: a throw in here would be caught and
 * retried by the runner, never seen by the test.
 * @param {number} count
 */
function fakeQueue(
  count,
  deleteFailure = (/** @type {string} */ _receiptHandle, /** @type {number} */ _call) =>
    /** @type {{ SenderFault: boolean, Code: string } | null} */ (null),
  { fifo = false } = {},
) {
  // FIFO: messages of groups g0, g1, g2 in turn, with the attributes SQS gives a FIFO queue's.
  const fifoAttributes = (/** @type {number} */ i) =>
    fifo
      ? { MessageGroupId: `g${i % 3}`, MessageDeduplicationId: `d${i}`, SequenceNumber: String(i) }
      : {};
  const message = (/** @type {number} */ i) => ({
    MessageId: `m${i}`,
    ReceiptHandle: `rh${i}`,
    Body: JSON.stringify({ email: `u${i}@x.io`, name: `U${i}` }),
    Attributes: { ApproximateReceiveCount: '1', ...fifoAttributes(i) },
  });
  const waiting = Array.from({ length: count }, (_, i) => message(i));
  let made = count;
  /** @type {{ max: number, answer: (out: { Messages: any[] }) => void }[]} long polls waiting at the queue */
  const polls = [];
  /** @type {number[]} the MaxNumberOfMessages of each receive */
  const receives = [];
  /** @type {string[]} */
  const deleted = [];
  /** @type {string[]} every receipt handle a delete was asked for, retries included */
  const deleteAsked = [];
  let deleteCalls = 0;
  /** @type {string[]} receipt handles whose visibility was changed */
  const released = [];
  /** @type {number[]} the VisibilityTimeout of each of those changes */
  const visibilityTimeouts = [];
  /** @type {string[]} commands the stand-in does not play */
  const unexpected = [];
  const sqs = /** @type {any} */ ({
    async send(
      /** @type {any} */ command,
      /** @type {{ abortSignal?: AbortSignal }} */ options = {},
    ) {
      if (command instanceof GetQueueAttributesCommand)
        return {
          Attributes: {
            QueueArn: fifo ? `${QUEUE_ARN}.fifo` : QUEUE_ARN,
            VisibilityTimeout: '60',
            ...(fifo ? { FifoQueue: 'true' } : {}),
          },
        };
      if (command instanceof ChangeMessageVisibilityBatchCommand) {
        for (const e of command.input.Entries) {
          released.push(e.ReceiptHandle);
          visibilityTimeouts.push(e.VisibilityTimeout);
        }
        return {
          Successful: command.input.Entries.map((/** @type {any} */ e) => ({ Id: e.Id })),
          Failed: [],
        };
      }
      if (command instanceof DeleteMessageBatchCommand) {
        deleteCalls++;
        /** @type {any[]} */
        const Failed = [];
        /** @type {any[]} */
        const Successful = [];
        for (const e of command.input.Entries) {
          deleteAsked.push(e.ReceiptHandle);
          const failure = deleteFailure(e.ReceiptHandle, deleteCalls);
          if (failure) Failed.push({ Id: e.Id, ...failure });
          else {
            deleted.push(e.ReceiptHandle);
            Successful.push({ Id: e.Id });
          }
        }
        return { Successful, Failed };
      }
      if (!(command instanceof ReceiveMessageCommand)) {
        unexpected.push(command.constructor.name);
        throw new Error(`not played: ${command.constructor.name}`);
      }
      const max = command.input.MaxNumberOfMessages;
      receives.push(max);
      if (waiting.length > 0) return { Messages: waiting.splice(0, max) };
      return new Promise((resolve, reject) => {
        // Aborted, the request ends here; the poll stays at the queue, as SQS's and ElasticMQ's do.
        options.abortSignal?.addEventListener('abort', () => reject(new Error('aborted')), {
          once: true,
        });
        const poll = { max, answer: resolve };
        polls.push(poll);
        setTimeout(() => {
          const at = polls.indexOf(poll);
          if (at === -1) return;
          polls.splice(at, 1);
          resolve({ Messages: [] });
        }, command.input.WaitTimeSeconds * 1000);
      });
    },
  });
  return {
    sqs,
    deleted,
    deleteAsked,
    receives,
    released,
    visibilityTimeouts,
    unexpected,
    left: () => waiting.length,
    openPolls: () => polls.length,
    /** `n` more messages, taken at once by the polls waiting at the queue, as SQS answers them. @param {number} n */
    send(n) {
      for (let i = 0; i < n; i++) waiting.push(message(made++));
      while (polls.length > 0 && waiting.length > 0) {
        const poll = /** @type {(typeof polls)[number]} */ (polls.shift());
        poll.answer({ Messages: waiting.splice(0, poll.max) });
      }
    },
  };
}

/**
 * Stops the runner, the mocked clock moving on a second at a time until the long polls open at the
 * queue have ended (RECEIVE_WAIT_SECONDS) and the stop has resolved.
 * @param {LocalEventSource} source
 */
async function stopRunner(source) {
  let done = false;
  const stopped = source.stop().finally(() => (done = true));
  for (let i = 0; i < 10 && !done; i++) {
    await flush();
    if (!done) mock.timers.tick(1000);
  }
  return stopped;
}

/** Lets every settled promise run its continuations. */
const flush = async () => {
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setImmediate(resolve));
};

/**
 * @param {ReturnType<typeof fakeQueue>} queue
 * @param {(event: { Records: any[] }) => Promise<any>} handler
 * @param {Partial<import('../../local/local-runner.js').RunnerOptions>} [options]
 */
function runner(queue, handler, options = {}) {
  /** @type {any[]} */
  const logs = [];
  const source = new LocalEventSource({
    sqs: queue.sqs,
    queueUrl: 'http://sqs.local/000000000000/sluice-users',
    handler,
    region: 'us-east-1',
    batchSize: 10,
    batchWindowMs: 1000,
    receivers: 1,
    concurrency: 1,
    functionTimeoutMs: 60_000,
    log: (line) => logs.push(line),
    ...options,
  });
  return { source, logs };
}

describe('LocalEventSource (unit, SQS stand-in, mocked timers)', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_700_000_000_000 }));
  afterEach(() => mock.timers.reset());

  test("full batches go at once; the rest waits for the batch window; every record in Lambda's shape", async () => {
    const queue = fakeQueue(25);
    /** @type {any[][]} */
    const events = [];
    const { source } = runner(queue, async (event) => {
      events.push(event.Records);
      return { batchItemFailures: [] };
    });
    await source.start();
    await flush();
    assert.deepEqual(
      events.map((e) => e.length),
      [10, 10],
      'two full batches, and 5 messages waiting',
    );
    mock.timers.tick(999);
    await flush();
    assert.equal(events.length, 2, 'not before the window is up');
    mock.timers.tick(1);
    await flush();
    assert.deepEqual(
      events.map((e) => e.length),
      [10, 10, 5],
    );
    assert.deepEqual(
      events.flat().map((r) => r.messageId),
      Array.from({ length: 25 }, (_, i) => `m${i}`),
    );
    assert.equal(events[0][0].eventSourceARN, QUEUE_ARN);
    assert.equal(events[0][0].eventSource, 'aws:sqs');
    assert.equal(queue.deleted.length, 25);
    await stopRunner(source);
    assert.deepEqual(queue.unexpected, []);
  });

  test('only the messages the handler did not report are deleted', async () => {
    const queue = fakeQueue(10);
    const { source } = runner(queue, async () => ({
      batchItemFailures: [{ itemIdentifier: 'm3' }, { itemIdentifier: 'm7' }],
    }));
    await source.start();
    await flush();
    const totals = await stopRunner(source);
    assert.deepEqual(queue.deleted.sort(), [
      'rh0',
      'rh1',
      'rh2',
      'rh4',
      'rh5',
      'rh6',
      'rh8',
      'rh9',
    ]);
    assert.deepEqual({ deleted: totals.deleted, failed: totals.failed }, { deleted: 8, failed: 2 });
    assert.deepEqual(
      queue.released.sort(),
      ['rh3', 'rh7'],
      'the failed ones, made visible again on stop',
    );
    assert.deepEqual(queue.visibilityTimeouts, [0, 0], 'visible at once');
    assert.deepEqual(queue.unexpected, []);
  });

  test('a delete SQS refuses as a sender fault (a stale receipt handle) is not retried; a throttled one is, until it passes', async () => {
    const queue = fakeQueue(10, (rh, call) => {
      if (rh === 'rh2') return { SenderFault: true, Code: 'ReceiptHandleIsInvalid' };
      if (rh === 'rh5' && call <= 2) return { SenderFault: false, Code: 'RequestThrottled' };
      return null;
    });
    const { source, logs } = runner(queue, async () => ({ batchItemFailures: [] }));
    await source.start();
    const stopped = source.stop();
    for (let i = 0; i < 10; i++) {
      await flush();
      mock.timers.runAll();
    }
    await stopped;
    assert.equal(
      queue.deleteAsked.filter((rh) => rh === 'rh2').length,
      1,
      'the stale handle is asked for once',
    );
    assert.equal(
      queue.deleteAsked.filter((rh) => rh === 'rh5').length,
      3,
      'the throttled one until it passes',
    );
    assert.deepEqual(queue.deleted.sort(), [
      'rh0',
      'rh1',
      'rh3',
      'rh4',
      'rh5',
      'rh6',
      'rh7',
      'rh8',
      'rh9',
    ]);
    assert.ok(
      logs.some(
        (l) =>
          l.msg === 'delete failed; the messages will reappear' &&
          l.count === 1 &&
          l.codes[0] === 'ReceiptHandleIsInvalid',
      ),
    );
  });

  test('a handler that throws returns the whole batch to the queue, as Lambda does', async () => {
    const queue = fakeQueue(10);
    const { source, logs } = runner(queue, async () => {
      throw new Error('service down');
    });
    await source.start();
    await flush();
    const totals = await stopRunner(source);
    assert.deepEqual(queue.deleted, []);
    assert.deepEqual(
      { handlerErrors: totals.handlerErrors, failed: totals.failed },
      { handlerErrors: 1, failed: 10 },
    );
    assert.ok(
      logs.some(
        (l) =>
          l.msg === 'handler failed; the batch returns to the queue' &&
          l.messages === 10 &&
          l.error === 'service down',
      ),
    );
  });

  test('on stop, the failed messages still hidden are made visible again for the next run; those visible already are left alone', async () => {
    const queue = fakeQueue(20);
    let call = 0;
    const { source, logs } = runner(queue, async (event) => {
      call++;
      if (call === 1)
        return { batchItemFailures: [{ itemIdentifier: event.Records[3].messageId }] };
      throw new Error('HTTP 401');
    });
    await source.start();
    await flush();
    assert.equal(call, 2);
    // 61 s on, past the queue's visibility timeout (60 s): every failed message is visible again already.
    mock.timers.tick(61_000);
    const totals = await stopRunner(source);
    assert.deepEqual(
      { deleted: totals.deleted, failed: totals.failed },
      { deleted: 9, failed: 11 },
    );
    assert.deepEqual(queue.released, []);
    // 59 s on (the stop's 2 s included), they are all still hidden: each is made visible.
    const again = fakeQueue(10);
    const second = runner(again, async () => {
      throw new Error('HTTP 401');
    });
    await second.source.start();
    await flush();
    mock.timers.tick(57_000);
    await stopRunner(second.source);
    assert.deepEqual(again.released.sort(), Array.from({ length: 10 }, (_, i) => `rh${i}`).sort());
    assert.ok(
      again.visibilityTimeouts.every((t) => t === 0),
      `visible at once: ${again.visibilityTimeouts}`,
    );
    assert.ok(
      second.logs.some(
        (l) => l.msg === 'failed messages made visible again for the next run' && l.count === 10,
      ),
    );
    assert.ok(logs.every((l) => l.msg !== 'failed messages made visible again for the next run'));
  });

  test('stop() stops polling and hands what was received to the handler before it resolves', async () => {
    const queue = fakeQueue(5);
    /** @type {number[]} */
    const sizes = [];
    const { source } = runner(queue, async (event) => {
      sizes.push(event.Records.length);
      return { batchItemFailures: [] };
    });
    await source.start();
    await flush();
    assert.deepEqual(sizes, [], 'a part batch waits for its window');
    const totals = await stopRunner(source);
    assert.deepEqual(sizes, [5], 'handed over at once, without waiting for the window');
    assert.equal(totals.deleted, 5);
  });

  test('stop() lets the long poll open at the queue end rather than abandon it, and hands what it brings to the handler', async () => {
    const queue = fakeQueue(0);
    /** @type {number[]} */
    const sizes = [];
    const { source } = runner(queue, async (event) => {
      sizes.push(event.Records.length);
      return { batchItemFailures: [] };
    });
    await source.start();
    await flush();
    assert.equal(queue.openPolls(), 1);
    let stopped = false;
    const stopping = source.stop().then((totals) => {
      stopped = true;
      return totals;
    });
    await flush();
    assert.equal(stopped, false, 'the stop waits for the open poll');
    // Sent after the stop: an abandoned poll would take them for a runner that is gone.
    queue.send(3);
    await flush();
    const totals = await stopping;
    assert.deepEqual(sizes, [3]);
    assert.equal(totals.deleted, 3);
    assert.equal(queue.openPolls(), 0, 'no poll left at the queue');
    assert.equal(queue.receives.length, 1, 'no poll after the stop');
  });

  test('back-pressure: no more is received than the invocations in flight can take', async () => {
    const queue = fakeQueue(100);
    /** @type {(() => void)[]} */
    const finish = [];
    const { source } = runner(
      queue,
      () => new Promise((resolve) => finish.push(() => resolve({ batchItemFailures: [] }))),
      { receivers: 2, concurrency: 1 },
    );
    await source.start();
    await flush();
    // One batch in the handler and one batch held: the receivers then wait instead of polling on.
    assert.equal(finish.length, 1);
    assert.ok(
      100 - queue.left() <= 30,
      `${100 - queue.left()} messages received while one invocation runs`,
    );
    const heldBefore = 100 - queue.left();
    await flush();
    assert.equal(100 - queue.left(), heldBefore, 'no further receives while full');
    finish.shift()?.();
    await flush();
    assert.equal(finish.length, 1, 'the next batch goes as soon as the slot is free');
    while (finish.length) {
      finish.shift()?.();
      await flush();
      mock.timers.tick(1000);
      await flush();
    }
    const totals = await stopRunner(source);
    assert.equal(totals.deleted, 100);
  });
  test("a FIFO queue: each receive is one batch, handed over at once (no window), at most 10, its records in Lambda's FIFO shape", async () => {
    const queue = fakeQueue(25, undefined, { fifo: true });
    /** @type {any[][]} */
    const events = [];
    const { source } = runner(
      queue,
      async (event) => {
        events.push(event.Records);
        // The second message of group g1 fails in the first batch: the handler reports it and g1's later one.
        return {
          batchItemFailures:
            events.length === 1 ? [{ itemIdentifier: 'm4' }, { itemIdentifier: 'm7' }] : [],
        };
      },
      { batchSize: 1000, batchWindowMs: 60_000, concurrency: 4 },
    );
    await source.start();
    await flush();
    assert.deepEqual(
      events.map((e) => e.length),
      [10, 10, 5],
      'not joined, not cut, not kept for the window',
    );
    assert.ok(
      queue.receives.every((n) => n === 10),
      `receives of at most 10: ${queue.receives}`,
    );
    assert.deepEqual(events[0][1].attributes, {
      ApproximateReceiveCount: '1',
      SentTimestamp: String(Date.now()),
      SenderId: '000000000000',
      ApproximateFirstReceiveTimestamp: String(Date.now()),
      SequenceNumber: '1',
      MessageGroupId: 'g1',
      MessageDeduplicationId: 'd1',
    });
    const totals = await stopRunner(source);
    assert.ok(
      !queue.deleted.includes('rh4') && !queue.deleted.includes('rh7'),
      'the reported messages are not deleted',
    );
    assert.equal(queue.deleted.length, 23);
    assert.equal(totals.failed, 2);
  });

  test('a FIFO queue with BATCH_SIZE under 10 receives that many at a time', async () => {
    const queue = fakeQueue(7, undefined, { fifo: true });
    /** @type {number[]} */
    const sizes = [];
    const { source } = runner(
      queue,
      async (event) => {
        sizes.push(event.Records.length);
        return { batchItemFailures: [] };
      },
      { batchSize: 3, concurrency: 4 },
    );
    await source.start();
    await flush();
    assert.deepEqual(sizes, [3, 3, 1]);
    assert.equal(queue.receives[0], 3);
    await stopRunner(source);
  });
});
