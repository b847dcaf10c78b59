import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createTestDatabase } from '../../../test/support/database.js';
import { startServerProcess } from '../../../test/support/server-process.js';
import { packMessages, sendMessages } from '../../local/producer.js';
import { startFeeder } from '../support/pipeline.js';
import { createQueuePair, makeSqsClient, waitUntil } from '../support/queues.js';

describe('the feeder of a client over its rate', () => {
  const sqs = makeSqsClient();
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  before(async () => {
    db = await createTestDatabase();
  });
  after(async () => {
    await db.drop();
    sqs.destroy();
  });

  test('told 429, it waits Retry-After and goes on: every user stored once, no message in the DLQ', async (t) => {
    const TOKEN = 'tok-feeder-rate-limited';
    const service = await startServerProcess({
      DATABASE_URL: db.url,
      INGEST_TOKENS: JSON.stringify({ feeder: { token: TOKEN, rate: 3000, burst: 3000 } }),
    });
    t.after(() => service.stop());
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 30, maxReceiveCount: 2 });
    const users = function* () {
      for (let i = 0; i < 15_000; i++) yield { email: `rate-${i}@example.com`, name: `Rate ${i}` };
    };
    await sendMessages({ sqs, queueUrl: queues.queueUrl, messages: packMessages(users(), 100) });

    const { stop, handlerLogs } = await startFeeder({
      sqs,
      queueUrl: queues.queueUrl,
      serviceUrl: service.baseUrl,
      env: { INGEST_TOKEN: TOKEN },
      batchSize: 20,
      functionTimeoutMs: 20_000,
    });
    t.after(stop);
    await waitUntil(
      async () => (await db.countUsers()) >= 15_000 && (await queues.depth(queues.queueUrl)) === 0,
      "the drain at the client's rate",
      120_000,
    );
    await stop();

    assert.equal(await db.countUsers(), 15_000);
    assert.equal(await queues.depth(queues.dlqUrl), 0);
    assert.ok(
      handlerLogs.some((l) => l.retries > 0),
      'the handler was told to wait',
    );
    const metrics = await (await fetch(`${service.baseUrl}/metrics`)).text();
    const refused = Number(
      /^sluice_client_refused_total\{client="feeder",reason="rate"\} (\d+)$/m.exec(metrics)?.[1],
    );
    assert.ok(refused > 0, 'the service answered 429');
    await queues.delete();
  });
});
