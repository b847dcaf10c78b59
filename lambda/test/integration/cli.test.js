import assert from 'node:assert/strict';
import { runNode } from '../../../test/support/child-process.js';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { DeleteMessageCommand, GetQueueAttributesCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { messageGroupOf } from '../../local/producer.js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { createQueuePair, makeSqsClient, sqsEndpoint, waitUntil } from '../support/queues.js';

const bin = (/** @type {string} */ name) => fileURLToPath(new URL(`../../local/bin/${name}`, import.meta.url));

/** @param {string} script @param {string[]} args @param {Record<string, string>} env */
function run(script, args, env) {
  return runNode([bin(script), ...args], { env: { ...process.env, ...env } });
}

describe('the producer and feeder commands', () => {
  const sqs = makeSqsClient();
  const ctx = useAppAndDatabase({ LOG_LEVEL: 'warn' });
  after(() => sqs.destroy());

  test('produce packs users per message, shows progress and a final count; the feeder stops on SIGTERM without losing a message', async () => {
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 30, maxReceiveCount: 5 });
    const env = { SQS_ENDPOINT: sqsEndpoint(), QUEUE_URL: queues.queueUrl, SERVICE_URL: ctx.app.baseUrl };

    const producer = run('produce.js', ['--count', '20000', '--per-message', '50'], env);
    assert.equal(await producer.exited, 0, producer.err());
    const final = JSON.parse(producer.out().trim().split('\n').at(-1) ?? '{}');
    assert.equal(final.users, 20_000);
    assert.equal(final.messages, 400);
    assert.match(producer.err(), /100% 20000\/20000 users/);
    assert.equal(await queues.depth(queues.queueUrl), 400);

    const feeder = run('feeder.js', [], { ...env, BATCH_SIZE: '10', BATCH_WINDOW_MS: '100', RECEIVERS: '2', RUNNER_CONCURRENCY: '1' });
    await waitUntil(async () => (await ctx.db.countUsers()) >= 2_000, 'the feeder to store users');
    feeder.child.kill('SIGTERM');
    assert.equal(await feeder.exited, 0, feeder.err());
    assert.match(feeder.out(), /feeder stopped/);

    // Nothing lost: every user is stored or still waits in the queue, and a second run finishes the job.
    const stored = await ctx.db.countUsers();
    assert.ok(stored < 20_000, 'stopped mid-drain');
    const again = run('feeder.js', [], { ...env, BATCH_SIZE: '100', BATCH_WINDOW_MS: '100' });
    await waitUntil(async () => (await ctx.db.countUsers()) === 20_000 && (await queues.depth(queues.queueUrl)) === 0, 'the second run to drain the rest', 90_000);
    again.child.kill('SIGINT');
    assert.equal(await again.exited, 0);
    assert.equal(await queues.depth(queues.dlqUrl), 0);
    await queues.delete();
  });

  test('while the batch in hand waits out an outage, a second SIGTERM leaves at once, and the batch returns to the queue', async () => {
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 3, maxReceiveCount: 5 });
    // Nothing listens on port 9: every post fails to connect, and the handler retries until its deadline.
    const env = { SQS_ENDPOINT: sqsEndpoint(), QUEUE_URL: queues.queueUrl, SERVICE_URL: 'http://127.0.0.1:9' };
    const producer = run('produce.js', ['--count', '100', '--per-message', '10'], env);
    assert.equal(await producer.exited, 0, producer.err());
    /** Messages a receive can take now. */
    const visible = async () =>
      Number((await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queues.queueUrl, AttributeNames: ['ApproximateNumberOfMessages'] }))).Attributes?.ApproximateNumberOfMessages ?? 0);

    const feeder = run('feeder.js', [], { ...env, BATCH_SIZE: '10', BATCH_WINDOW_MS: '100' });
    await waitUntil(async () => (await visible()) === 0, 'the feeder to receive every message');
    feeder.child.kill('SIGTERM');
    const first = await Promise.race([feeder.exited, new Promise((resolve) => setTimeout(() => resolve('still running'), 1000))]);
    assert.equal(first, 'still running', 'the first signal waits for the batch in hand');
    feeder.child.kill('SIGTERM');
    assert.equal(await feeder.exited, 1, feeder.err());
    assert.match(feeder.out() + feeder.err(), /stopped at once/);
    await waitUntil(async () => (await visible()) === 10, 'the messages to return to the queue', 30_000);
    assert.equal(await queues.depth(queues.dlqUrl), 0);
    await queues.delete();
  });

  test('to a FIFO queue, produce gives each message a group of its users\' emails and an id of its own; the feeder drains it', async () => {
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 30, maxReceiveCount: 5, fifo: true });
    const env = { SQS_ENDPOINT: sqsEndpoint(), QUEUE_URL: queues.queueUrl, SERVICE_URL: ctx.app.baseUrl };
    const produce = async (/** @type {number} */ count) => {
      const producer = run('produce.js', ['--count', String(count), '--per-message', '50', '--message-groups', '8'], env);
      assert.equal(await producer.exited, 0, producer.err());
      return JSON.parse(producer.out().trim().split('\n').at(-1) ?? '{}');
    };
    const first = await produce(2000);
    assert.equal(first.users, 2000);

    // Every message, taken off the queue (a FIFO receive hides the rest of a group while some is in flight).
    /** @type {import('@aws-sdk/client-sqs').Message[]} */
    const seen = [];
    for (let i = 0; i < 40 && seen.length < first.messages; i++) {
      const out = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queues.queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageSystemAttributeNames: ['All'] }));
      for (const m of out.Messages ?? []) {
        seen.push(m);
        await sqs.send(new DeleteMessageCommand({ QueueUrl: queues.queueUrl, ReceiptHandle: m.ReceiptHandle }));
      }
    }
    assert.equal(seen.length, first.messages);
    assert.equal(new Set(seen.map((m) => m.Attributes?.MessageGroupId)).size, 8);
    let users = 0;
    for (const m of seen) {
      const inIt = JSON.parse(/** @type {string} */ (m.Body));
      users += inIt.length;
      assert.ok(inIt.every((/** @type {any} */ u) => messageGroupOf(u, 8) === m.Attributes?.MessageGroupId), 'a message holds users of its group only');
    }
    assert.equal(users, 2000);
    assert.equal(new Set(seen.map((m) => m.Attributes?.MessageDeduplicationId)).size, seen.length);

    // The feeder command plays the FIFO queue (its receives are its batches) and drains another run.
    const before = await ctx.db.countUsers();
    await produce(500);
    const feeder = run('feeder.js', [], env);
    await waitUntil(async () => (await ctx.db.countUsers()) === before + 500 && (await queues.depth(queues.queueUrl)) === 0, 'the feeder to drain the FIFO queue', 60_000);
    feeder.child.kill('SIGTERM');
    assert.equal(await feeder.exited, 0, feeder.err());
    assert.equal(await queues.depth(queues.dlqUrl), 0);
    await queues.delete();
  });

  test('bad arguments and configuration are refused with a message', async () => {
    const noCount = run('produce.js', [], { QUEUE_URL: 'http://127.0.0.1:1/q' });
    assert.equal(await noCount.exited, 2);
    assert.match(noCount.err(), /--count/);
    const noService = run('feeder.js', [], { QUEUE_URL: 'http://127.0.0.1:1/q', SERVICE_URL: '' });
    assert.equal(await noService.exited, 1);
    assert.match(noService.err(), /SERVICE_URL is required/);
  });
});
