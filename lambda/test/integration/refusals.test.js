import assert from 'node:assert/strict';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { after, describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { uniqueTag } from '../../../test/support/users.js';
import { startFeeder } from '../support/pipeline.js';
import { createQueuePair, makeSqsClient, waitUntil } from '../support/queues.js';
import { startStubService } from '../support/stub-service.js';

/** Every body in a queue, received until `expected` are in hand. @param {import('@aws-sdk/client-sqs').SQSClient} sqs @param {string} url @param {number} expected */
async function bodiesIn(sqs, url, expected) {
  /** @type {string[]} */ const bodies = [];
  for (let i = 0; i < 10 && bodies.length < expected; i++) {
    const out = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
    );
    bodies.push(...(out.Messages ?? []).map((m) => /** @type {string} */ (m.Body)));
  }
  return bodies.sort();
}

describe('refusals through the queue: what the service, or what stands before it, answers', () => {
  const sqs = makeSqsClient();
  const ctx = useAppAndDatabase({ LOG_LEVEL: 'warn', MAX_BODY_BYTES: '4096' });
  after(() => sqs.destroy());

  test('413 from the service: chunks are halved until they pass; a user over the limit alone goes to the DLQ', async (t) => {
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 1, maxReceiveCount: 2 });
    t.after(() => queues.delete());
    const tag = uniqueTag();
    const good = Array.from({ length: 120 }, (_, i) =>
      JSON.stringify({
        email: `big-${tag}-${i}@example.com`,
        name: `A user of a run that is posted in halves ${i}`,
      }),
    );
    const huge = JSON.stringify({ email: `huge-${tag}@example.com`, name: 'x'.repeat(5_000) });
    await queues.send([...good.slice(0, 60), huge, ...good.slice(60)]);

    const feeder = await startFeeder({
      sqs,
      queueUrl: queues.queueUrl,
      serviceUrl: ctx.app.baseUrl,
    });
    t.after(feeder.stop);
    await waitUntil(
      async () =>
        (await queues.depth(queues.dlqUrl)) === 1 && (await queues.depth(queues.queueUrl)) === 0,
      'the huge message in the DLQ',
      60_000,
    );
    await feeder.stop();

    const stored = await ctx.db.pool.query(
      'SELECT count(*)::int AS n FROM users WHERE email LIKE $1',
      [`big-${tag}-%`],
    );
    assert.equal(stored.rows[0].n, 120, 'every good user stored');
    assert.deepEqual(await bodiesIn(sqs, queues.dlqUrl, 1), [huge]);
    assert.ok(
      feeder.handlerLogs.some((l) => l.message === 'sqs batch fed' && l.posts > 1),
      'some chunk was over the limit and halved',
    );
    const failures = feeder.handlerLogs
      .filter((l) => l.message === 'messages not stored')
      .flatMap((l) => l.failures);
    assert.ok(
      failures.length > 0 &&
        failures.every(
          (/** @type {any} */ f) =>
            f.kind === 'poison' && f.reason === "one user is over the service's body limit (413)",
        ),
      JSON.stringify(failures),
    );
  });

  test('a 400 naming users outside the chunk (a proxy, another version): one post an invocation, then the DLQ', async (t) => {
    const stub = await startStubService((users) => [
      400,
      {
        error: 'invalid_batch',
        message: 'no',
        errors: [{ index: users.length + 3, field: 'email', message: 'x' }],
      },
    ]);
    t.after(() => stub.close());
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 1, maxReceiveCount: 2 });
    t.after(() => queues.delete());
    const bodies = Array.from({ length: 5 }, (_, i) =>
      JSON.stringify([{ email: `out-${i}@example.com`, name: `Out ${i}` }]),
    );
    await queues.send(bodies);

    const feeder = await startFeeder({ sqs, queueUrl: queues.queueUrl, serviceUrl: stub.url });
    t.after(feeder.stop);
    await waitUntil(
      async () =>
        (await queues.depth(queues.dlqUrl)) === 5 && (await queues.depth(queues.queueUrl)) === 0,
      'every message in the DLQ',
      60_000,
    );
    await feeder.stop();

    const invocations = feeder.handlerLogs.filter((l) => l.message === 'sqs batch fed');
    assert.equal(
      stub.requests.length,
      invocations.length,
      'one post an invocation: the chunk is not posted again',
    );
    assert.ok(
      invocations.every((l) => l.posts === 1 && l.poisonMessages === l.records),
      JSON.stringify(invocations),
    );
    assert.equal(
      invocations.reduce((n, l) => n + l.records, 0),
      10,
      'each message received twice (maxReceiveCount), no more',
    );
    assert.deepEqual(await bodiesIn(sqs, queues.dlqUrl, 5), bodies.sort());
    const reasons = new Set(
      feeder.handlerLogs
        .filter((l) => l.message === 'messages not stored')
        .flatMap((l) => l.failures.map((/** @type {any} */ f) => f.reason)),
    );
    assert.ok(
      [...reasons].every((r) =>
        /^HTTP 400 invalid_batch naming user \d+ of a chunk of \d+$/.test(r),
      ),
      [...reasons].join('; '),
    );
  });
});
