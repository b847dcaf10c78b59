import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { packMessages, sendMessages } from '../../local/producer.js';
import { startFeeder } from '../support/pipeline.js';
import { createQueuePair, makeSqsClient, waitUntil } from '../support/queues.js';

// A service that takes about four 1000-user requests at once and never lets one wait: the feeder
// (2 invocations × 8 posts at a time) sends four times that, so most posts meet 503 + Retry-After.
const SERVICE_ENV = {
  ADMISSION_BUDGET_BYTES: String(256 * 1024),
  ADMISSION_WAIT_MS: '0',
  LOG_LEVEL: 'warn',
};
const USERS = 60_000;

describe('a burst larger than the service takes at once, through the queue', () => {
  const sqs = makeSqsClient();
  const ctx = useAppAndDatabase(SERVICE_ENV);
  after(() => sqs.destroy());

  test('the feeder backs off on 503 + Retry-After and drains every user; nothing reaches the dead-letter queue', async (t) => {
    // maxReceiveCount 2: a message the feeder gave up on twice would be in the DLQ.
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 60, maxReceiveCount: 2 });
    const users = function* () {
      for (let i = 0; i < USERS; i++) yield { email: `burst-${i}@example.com`, name: `Burst ${i}` };
    };
    await sendMessages({
      sqs,
      queueUrl: queues.queueUrl,
      messages: packMessages(users(), 100),
      concurrency: 8,
    });

    const started = Date.now();
    const { stop, handlerLogs } = await startFeeder({
      sqs,
      queueUrl: queues.queueUrl,
      serviceUrl: ctx.app.baseUrl,
      batchSize: 100,
      functionTimeoutMs: 30_000,
      env: { POST_CHUNK_ITEMS: '1000', POST_CONCURRENCY: '8' },
    });
    t.after(stop);
    await waitUntil(
      async () =>
        (await ctx.db.countUsers()) >= USERS && (await queues.depth(queues.queueUrl)) === 0,
      `${USERS} rows and an empty queue`,
      120_000,
    );
    const totals = await stop();
    const drainSeconds = (Date.now() - started) / 1000;

    const metrics = await (await fetch(`${ctx.app.baseUrl}/metrics`)).text();
    const shed = Number(
      /^sluice_admission_shed_total\{reason="queue_full"\} (\d+)$/m.exec(metrics)?.[1] ?? 0,
    );
    const retries = handlerLogs.reduce((n, l) => n + (l.retries ?? 0), 0);
    // The figures for the closing note; the assertions below are what must hold.
    console.error(
      `[burst] ${USERS} users drained in ${drainSeconds.toFixed(1)} s; ${shed} requests shed, ${retries} retries`,
    );

    assert.ok(shed > 0, 'the burst was more than the service took at once');
    assert.ok(retries > 0, 'the feeder retried what was shed');
    assert.equal(await ctx.db.countUsers(), USERS);
    assert.equal(await queues.depth(queues.dlqUrl), 0);
    assert.equal(totals.failed, 0, 'no message was reported failed');
    await queues.delete();
  });
});
