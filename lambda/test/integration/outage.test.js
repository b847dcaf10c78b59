import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { freePort } from '@sluice/db/local-postgres';
import { createTestDatabase } from '../../../test/support/database.js';
import { startServerProcess } from '../../../test/support/server-process.js';
import { packMessages, sendMessages } from '../../local/producer.js';
import { startFeeder } from '../support/pipeline.js';
import { createQueuePair, makeSqsClient, waitUntil } from '../support/queues.js';

describe('the service stops for a while mid-drain', () => {
  const sqs = makeSqsClient();
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  before(async () => {
    db = await createTestDatabase();
  });
  after(async () => {
    await db.drop();
    sqs.destroy();
  });

  test('an invocation that finds the service gone fails whole; afterwards every user is stored and no message reaches the DLQ', async (t) => {
    const port = String(await freePort());
    const env = { DATABASE_URL: db.url, PORT: port };
    let service = await startServerProcess(env);
    t.after(() => service.stop());
    // As AWS requires, a message stays hidden longer than an invocation may hold it (visibility
    // 10 s, function timeout 4 s): a message that outlived its visibility while the service was down
    // would be received again, and the first receipt could no longer delete it.
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 10, maxReceiveCount: 5 });
    const users = function* () {
      for (let i = 0; i < 30_000; i++)
        yield { email: `outage-${i}@example.com`, name: `Outage ${i}` };
    };
    await sendMessages({ sqs, queueUrl: queues.queueUrl, messages: packMessages(users(), 100) });

    // Small invocations, so the drain is still going when the service goes away.
    const { stop, logs, handlerLogs } = await startFeeder({
      sqs,
      queueUrl: queues.queueUrl,
      serviceUrl: service.baseUrl,
      batchSize: 10,
      functionTimeoutMs: 4_000,
    });
    t.after(stop);
    await waitUntil(async () => (await db.countUsers()) >= 3_000, 'the drain to be under way');
    service.child.kill('SIGKILL');
    await service.exited;
    const atOutage = await db.countUsers();
    // With nothing to post to, the handler must throw (Lambda then returns the batch and backs off
    // its pollers) rather than report every message failed; the runner logs each thrown invocation.
    const fromOutage = logs.length;
    await waitUntil(
      () =>
        logs
          .slice(fromOutage)
          .some(
            (l) => l.msg === 'handler failed; the batch returns to the queue' && l.messages > 0,
          ),
      'an invocation to fail whole while the service is down',
      30_000,
    );
    service = await startServerProcess(env);

    await waitUntil(
      async () => (await db.countUsers()) >= 30_000 && (await queues.depth(queues.queueUrl)) === 0,
      'the rest of the drain',
      120_000,
    );
    await stop();
    service.child.kill('SIGTERM');
    await service.exited;

    assert.ok(atOutage < 30_000, 'the outage came mid-drain');
    assert.equal(await db.countUsers(), 30_000);
    assert.equal(await queues.depth(queues.dlqUrl), 0);
    assert.ok(
      handlerLogs.some((l) => l.retries > 0),
      'the handler retried through the outage',
    );
    await queues.delete();
  });
});
