// `npm run feeder` stopped with Ctrl-C and started again, against real ElasticMQ and the real
// service: nothing sent in between waits out the queue's visibility timeout.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { runNode } from '../../../test/support/child-process.js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { createQueuePair, makeSqsClient, sqsEndpoint, waitUntil } from '../support/queues.js';

const FEEDER = fileURLToPath(new URL('../../local/bin/feeder.js', import.meta.url));

describe('the feeder stopped cleanly and started again', () => {
  const sqs = makeSqsClient();
  const ctx = useAppAndDatabase({ LOG_LEVEL: 'warn' });
  after(() => sqs.destroy());

  test('stop, produce 10 messages, start: all 10 are stored within 10 s, none hidden by the stopped run', async (t) => {
    // sluice-users' 60 s of visibility: a message taken by a poll of the stopped run would wait that long.
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 60, maxReceiveCount: 5 });
    t.after(() => queues.delete());
    const env = {
      ...process.env,
      SQS_ENDPOINT: sqsEndpoint(),
      QUEUE_URL: queues.queueUrl,
      SERVICE_URL: ctx.app.baseUrl,
      BATCH_WINDOW_MS: '100',
    };
    const message = (/** @type {string} */ run, /** @type {number} */ i) =>
      JSON.stringify([{ email: `restart-${run}-${i}@example.com`, name: `Restart ${i}` }]);

    const first = runNode([FEEDER], { env });
    // One message through the first run: its long polls are open at the queue by then.
    await queues.send([message('first', 0)]);
    await waitUntil(
      async () => (await ctx.db.countUsers()) === 1,
      'the first run to store its user',
      30_000,
    ).catch((err) => assert.fail(`${err.message}:\n${first.out()}\n${first.err()}`));
    first.child.kill('SIGINT');
    assert.equal(await first.exited, 0, first.err());
    assert.match(first.out(), /"message":"feeder stopped"/);

    await queues.send(Array.from({ length: 10 }, (_, i) => message('after-stop', i)));
    const started = performance.now();
    const second = runNode([FEEDER], { env });
    try {
      await waitUntil(
        async () => (await ctx.db.countUsers()) === 11,
        'the second run to store the 10 users sent after the stop',
        10_000,
      ).catch(async (err) =>
        assert.fail(
          `${err.message} (${(await ctx.db.countUsers()) - 1} stored):\n${second.out()}\n${second.err()}`,
        ),
      );
      t.diagnostic(
        `all 10 stored ${Math.round(performance.now() - started)} ms after the second start`,
      );
    } finally {
      second.child.kill('SIGINT');
      await second.exited;
    }
    assert.equal(await queues.depth(queues.queueUrl), 0);
  });
});
