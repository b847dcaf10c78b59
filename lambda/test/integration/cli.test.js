import assert from 'node:assert/strict';
import { runNode } from '../../../test/support/child-process.js';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import {
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
} from '@aws-sdk/client-sqs';
import { messageGroupOf } from '../../local/producer.js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { createQueuePair, makeSqsClient, sqsEndpoint, waitUntil } from '../support/queues.js';

const bin = (/** @type {string} */ name) =>
  fileURLToPath(new URL(`../../local/bin/${name}`, import.meta.url));

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
    const env = {
      SQS_ENDPOINT: sqsEndpoint(),
      QUEUE_URL: queues.queueUrl,
      SERVICE_URL: ctx.app.baseUrl,
    };

    const producer = run('produce.js', ['--count', '20000', '--per-message', '50'], env);
    assert.equal(await producer.exited, 0, producer.err());
    const final = JSON.parse(producer.out().trim().split('\n').at(-1) ?? '{}');
    assert.equal(final.users, 20_000);
    assert.equal(final.messages, 400);
    assert.match(producer.err(), /100% 20000\/20000 users/);
    assert.equal(await queues.depth(queues.queueUrl), 400);

    const feeder = run('feeder.js', [], {
      ...env,
      BATCH_SIZE: '10',
      BATCH_WINDOW_MS: '100',
      RECEIVERS: '2',
      RUNNER_CONCURRENCY: '1',
    });
    await waitUntil(async () => (await ctx.db.countUsers()) >= 2_000, 'the feeder to store users');
    feeder.child.kill('SIGTERM');
    assert.equal(await feeder.exited, 0, feeder.err());
    assert.match(feeder.out(), /feeder stopped/);

    // Nothing lost: every user is stored or still waits in the queue, and a second run finishes the job.
    const stored = await ctx.db.countUsers();
    assert.ok(stored < 20_000, 'stopped mid-drain');
    const again = run('feeder.js', [], { ...env, BATCH_SIZE: '100', BATCH_WINDOW_MS: '100' });
    await waitUntil(
      async () =>
        (await ctx.db.countUsers()) === 20_000 && (await queues.depth(queues.queueUrl)) === 0,
      'the second run to drain the rest',
      90_000,
    );
    again.child.kill('SIGINT');
    assert.equal(await again.exited, 0);
    assert.equal(await queues.depth(queues.dlqUrl), 0);
    await queues.delete();
  });

  test("produce --stamp-changed-at: each user without changedAt gets the time it was produced, in the order read; a file's own is kept", async () => {
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 30, maxReceiveCount: 5 });
    const dir = await mkdtemp(path.join(tmpdir(), 'sluice-produce-'));
    const file = path.join(dir, 'users.ndjson');
    const own = '2020-01-01T00:00:00+01:00';
    await writeFile(
      file,
      [
        { email: 'a@x.io', name: 'A' },
        { email: 'b@x.io', name: 'B', changedAt: own },
        { email: 'c@x.io', name: 'C' },
      ]
        .map((u) => JSON.stringify(u))
        .join('\n'),
    );
    const producer = run(
      'produce.js',
      ['--file', file, '--per-message', '10', '--stamp-changed-at'],
      { SQS_ENDPOINT: sqsEndpoint(), QUEUE_URL: queues.queueUrl },
    );
    assert.equal(await producer.exited, 0, producer.err());
    const received = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queues.queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
      }),
    );
    const users = /** @type {{ email: string, changedAt: string }[]} */ (
      JSON.parse(received.Messages?.[0]?.Body ?? '[]')
    );
    assert.deepEqual(
      users.map((u) => u.email),
      ['a@x.io', 'b@x.io', 'c@x.io'],
    );
    assert.equal(users[1].changedAt, own);
    assert.match(users[0].changedAt, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    assert.ok(users[0].changedAt < users[2].changedAt, 'a later line is a newer change');
    await rm(dir, { recursive: true, force: true });
    await queues.delete();
  });

  test('while the batch in hand waits out an outage, a second SIGTERM leaves at once, and the batch returns to the queue', async () => {
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 3, maxReceiveCount: 5 });
    // Nothing listens on port 9: every post fails to connect, and the handler retries until its deadline.
    const env = {
      SQS_ENDPOINT: sqsEndpoint(),
      QUEUE_URL: queues.queueUrl,
      SERVICE_URL: 'http://127.0.0.1:9',
    };
    const producer = run('produce.js', ['--count', '100', '--per-message', '10'], env);
    assert.equal(await producer.exited, 0, producer.err());
    /** Messages a receive can take now. */
    const visible = async () =>
      Number(
        (
          await sqs.send(
            new GetQueueAttributesCommand({
              QueueUrl: queues.queueUrl,
              AttributeNames: ['ApproximateNumberOfMessages'],
            }),
          )
        ).Attributes?.ApproximateNumberOfMessages ?? 0,
      );

    const feeder = run('feeder.js', [], { ...env, BATCH_SIZE: '10', BATCH_WINDOW_MS: '100' });
    await waitUntil(async () => (await visible()) === 0, 'the feeder to receive every message');
    feeder.child.kill('SIGTERM');
    const first = await Promise.race([
      feeder.exited,
      new Promise((resolve) => setTimeout(() => resolve('still running'), 1000)),
    ]);
    assert.equal(first, 'still running', 'the first signal waits for the batch in hand');
    feeder.child.kill('SIGTERM');
    assert.equal(await feeder.exited, 1, feeder.err());
    assert.match(feeder.out() + feeder.err(), /stopped at once/);
    await waitUntil(
      async () => (await visible()) === 10,
      'the messages to return to the queue',
      30_000,
    );
    assert.equal(await queues.depth(queues.dlqUrl), 0);
    await queues.delete();
  });

  test("to a FIFO queue, produce gives each message a group of its users' emails and an id of its own; the feeder drains it", async () => {
    const queues = await createQueuePair(sqs, {
      visibilityTimeoutSeconds: 30,
      maxReceiveCount: 5,
      fifo: true,
    });
    const env = {
      SQS_ENDPOINT: sqsEndpoint(),
      QUEUE_URL: queues.queueUrl,
      SERVICE_URL: ctx.app.baseUrl,
    };
    const produce = async (/** @type {number} */ count) => {
      const producer = run(
        'produce.js',
        ['--count', String(count), '--per-message', '50', '--message-groups', '8'],
        env,
      );
      assert.equal(await producer.exited, 0, producer.err());
      return JSON.parse(producer.out().trim().split('\n').at(-1) ?? '{}');
    };
    const first = await produce(2000);
    assert.equal(first.users, 2000);

    // Every message, taken off the queue (a FIFO receive hides the rest of a group while some is in flight).
    /** @type {import('@aws-sdk/client-sqs').Message[]} */
    const seen = [];
    for (let i = 0; i < 40 && seen.length < first.messages; i++) {
      const out = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queues.queueUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
          MessageSystemAttributeNames: ['All'],
        }),
      );
      for (const m of out.Messages ?? []) {
        seen.push(m);
        await sqs.send(
          new DeleteMessageCommand({ QueueUrl: queues.queueUrl, ReceiptHandle: m.ReceiptHandle }),
        );
      }
    }
    assert.equal(seen.length, first.messages);
    assert.equal(new Set(seen.map((m) => m.Attributes?.MessageGroupId)).size, 8);
    let users = 0;
    for (const m of seen) {
      const inIt = JSON.parse(/** @type {string} */ (m.Body));
      users += inIt.length;
      assert.ok(
        inIt.every((/** @type {any} */ u) => messageGroupOf(u, 8) === m.Attributes?.MessageGroupId),
        'a message holds users of its group only',
      );
    }
    assert.equal(users, 2000);
    assert.equal(new Set(seen.map((m) => m.Attributes?.MessageDeduplicationId)).size, seen.length);

    // The feeder command plays the FIFO queue (its receives are its batches) and drains another run.
    const before = await ctx.db.countUsers();
    await produce(500);
    const feeder = run('feeder.js', [], env);
    await waitUntil(
      async () =>
        (await ctx.db.countUsers()) === before + 500 && (await queues.depth(queues.queueUrl)) === 0,
      'the feeder to drain the FIFO queue',
      60_000,
    );
    feeder.child.kill('SIGTERM');
    assert.equal(await feeder.exited, 0, feeder.err());
    assert.equal(await queues.depth(queues.dlqUrl), 0);
    await queues.delete();
  });

  test('bad arguments and configuration are refused with a message', async () => {
    const noCount = run('produce.js', [], { QUEUE_URL: 'http://127.0.0.1:1/q' });
    assert.equal(await noCount.exited, 2);
    assert.match(noCount.err(), /--count/);
    const eraseAndCount = run('produce.js', ['--erase', 'a@x.io', '--count', '3'], {
      QUEUE_URL: 'http://127.0.0.1:1/q',
    });
    assert.equal(await eraseAndCount.exited, 2);
    assert.match(
      eraseAndCount.err(),
      /'--erase <email\.\.\.>' cannot be used with option '--count/,
    );
    const noService = run('feeder.js', [], { QUEUE_URL: 'http://127.0.0.1:1/q', SERVICE_URL: '' });
    assert.equal(await noService.exited, 1);
    assert.match(noService.err(), /SERVICE_URL is required/);
  });

  test('a file, a queue or an SQS that is not there: one line naming it, exit 1, no stack trace', async () => {
    const missing = '/nonexistent/users.ndjson';
    const noFile = run('produce.js', ['--file', missing], {
      SQS_ENDPOINT: sqsEndpoint(),
      QUEUE_URL: `${sqsEndpoint()}/000000000000/sluice-nope`,
    });
    assert.equal(await noFile.exited, 1);
    assert.equal(noFile.err(), `produce: cannot read ${missing}: no such file\n`);

    const queueUrl = `${sqsEndpoint()}/000000000000/sluice-no-such-queue`;
    const noQueue = run('feeder.js', [], {
      SQS_ENDPOINT: sqsEndpoint(),
      QUEUE_URL: queueUrl,
      SERVICE_URL: ctx.app.baseUrl,
    });
    assert.equal(await noQueue.exited, 1);
    assert.equal(
      noQueue.err(),
      `feeder: cannot use the queue ${queueUrl}: The specified queue does not exist (QueueDoesNotExist); is ElasticMQ running (\`npm run elasticmq\`), and is QUEUE_URL one of its queues?\n`,
    );

    // Port 1 on loopback: nothing listens.
    const noSqs = run('feeder.js', [], {
      SQS_ENDPOINT: 'http://127.0.0.1:1',
      QUEUE_URL: 'http://127.0.0.1:1/000000000000/sluice-users',
      SERVICE_URL: ctx.app.baseUrl,
    });
    assert.equal(await noSqs.exited, 1);
    assert.match(
      noSqs.err(),
      /^feeder: cannot use the queue http:\/\/127\.0\.0\.1:1\/000000000000\/sluice-users: connect ECONNREFUSED 127\.0\.0\.1:1; is ElasticMQ running/,
    );
    assert.equal(noSqs.err().split('\n').filter(Boolean).length, 1, noSqs.err());
  });
});

describe('the feeder against a service that refuses its token', () => {
  const sqs = makeSqsClient();
  const ctx = useAppAndDatabase({ LOG_LEVEL: 'warn', INGEST_TOKEN: 'the-service-token' });
  after(() => sqs.destroy());

  test('the refusal is said once, naming what to set and never the token; after Ctrl-C the corrected run stores every message at once', async () => {
    // Lambda's 60 s of visibility: without the runner's release on stop, the corrected run would wait that long.
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 60, maxReceiveCount: 5 });
    const users = Array.from({ length: 500 }, (_, i) => ({
      email: `refused-${i}@example.com`,
      name: `Refused ${i}`,
    }));
    await queues.send(
      Array.from({ length: 5 }, (_, m) => JSON.stringify(users.slice(m * 100, m * 100 + 100))),
    );
    const env = {
      SQS_ENDPOINT: sqsEndpoint(),
      QUEUE_URL: queues.queueUrl,
      SERVICE_URL: ctx.app.baseUrl,
      BATCH_SIZE: '2',
      BATCH_WINDOW_MS: '100',
    };

    const wrong = run('feeder.js', [], { ...env, INGEST_TOKEN: 'a-wrong-token' });
    await waitUntil(
      () => (wrong.out().match(/"batch done"/g) ?? []).length >= 3,
      'three batches refused',
    );
    // Powertools' Logger writes warnings and errors on stderr.
    const said = wrong
      .err()
      .split('\n')
      .filter((l) => l.includes('refused the feeder'));
    assert.equal(said.length, 1, 'said once, not once a batch');
    assert.match(
      said[0],
      /"level":"ERROR","message":"the service refused the feeder's bearer token \(HTTP 401\)\. Set the feeder's INGEST_TOKEN to the service's INGEST_TOKEN and start it again/,
    );
    const stopping = Date.now();
    wrong.child.kill('SIGINT');
    assert.equal(await wrong.exited, 0, wrong.err());
    assert.ok(Date.now() - stopping < 30_000, 'it stops once its long polls have ended');
    assert.match(wrong.out(), /"failed messages made visible again for the next run".*"count":5/);
    assert.ok(!(wrong.out() + wrong.err()).includes('a-wrong-token'), 'the token is never printed');
    assert.equal(await ctx.db.countUsers(), 0);

    const started = Date.now();
    const right = run('feeder.js', [], { ...env, INGEST_TOKEN: 'the-service-token' });
    await waitUntil(
      async () => (await ctx.db.countUsers()) === 500,
      'the corrected run to store every user',
      20_000,
    ).catch(async (err) =>
      assert.fail(
        `${err.message}: ${await ctx.db.countUsers()} stored\n${wrong.out()}\n${right.out()}\n${right.err()}`,
      ),
    );
    assert.ok(Date.now() - started < 20_000, 'not after the 60 s visibility timeout');
    right.child.kill('SIGINT');
    assert.equal(await right.exited, 0, right.err());
    assert.doesNotMatch(right.out() + right.err(), /refused the feeder/);
    assert.equal(await queues.depth(queues.queueUrl), 0);
    await queues.delete();
  });

  test('no token at all: said as such', async () => {
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 60, maxReceiveCount: 5 });
    await queues.send([JSON.stringify({ email: 'tokenless@example.com', name: 'Tokenless' })]);
    const feeder = run('feeder.js', [], {
      SQS_ENDPOINT: sqsEndpoint(),
      QUEUE_URL: queues.queueUrl,
      SERVICE_URL: ctx.app.baseUrl,
      BATCH_WINDOW_MS: '100',
      INGEST_TOKEN: '',
    });
    await waitUntil(() => feeder.out().includes('"batch done"'), 'the batch refused');
    assert.match(
      feeder.err(),
      /the service refused the feeder \(HTTP 401\): it wants a bearer token and the feeder sends none\. Set the feeder's INGEST_TOKEN/,
    );
    feeder.child.kill('SIGTERM');
    assert.equal(await feeder.exited, 0, feeder.err());
    await queues.delete();
  });
});
