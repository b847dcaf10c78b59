import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { DeleteMessageCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { after, describe, test } from 'node:test';
import { runNode } from '../../../test/support/child-process.js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { uniqueTag } from '../../../test/support/users.js';
import { messageGroupOf, sendMessages } from '../../local/producer.js';
import { startFeeder } from '../support/pipeline.js';
import { createQueuePair, makeSqsClient, sqsEndpoint, waitUntil } from '../support/queues.js';
import { startStubService } from '../support/stub-service.js';

// Erase messages (operation=erase) through ElasticMQ, the local runner and the real handler, to a
// stand-in service that keeps every post to /users and /erasures in the order it came.

/** @param {any[]} items @param {number} _n @param {string} route @returns {[number, unknown]} */
const taken = (items, _n, route) =>
  route === '/erasures'
    ? [200, { received: items.length, erased: items.length, absent: 0 }]
    : [201, { received: items.length, inserted: items.length, duplicates: 0 }];

describe('erasures through the queue: producer → ElasticMQ → local runner → handler → stand-in', () => {
  const sqs = makeSqsClient();
  after(() => sqs.destroy());

  /**
   * One message, sent by the producer's own sender, in the order of the calls.
   * @param {string} queueUrl @param {unknown} body @param {'erase'} [operation]
   */
  async function send(queueUrl, body, operation) {
    async function* one() {
      yield { body: JSON.stringify(body), users: 1 };
    }
    await sendMessages({ sqs, queueUrl, messages: one(), operation });
  }

  /** @param {Awaited<ReturnType<typeof startStubService>>} stub */
  const posted = (stub) =>
    stub.paths.map((route, i) => [route, stub.requests[i].map((/** @type {any} */ u) => u.email)]);

  test('an erase message, then the old create redelivered: posted in that order, in one batch; nothing in the dead-letter queue', async (t) => {
    const stub = await startStubService(taken);
    t.after(() => stub.close());
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 5, maxReceiveCount: 3 });
    t.after(() => queues.delete());
    const create = { email: 'gone@example.com', name: 'Gone' };

    await send(queues.queueUrl, create);
    const first = await startFeeder({ sqs, queueUrl: queues.queueUrl, serviceUrl: stub.url });
    t.after(first.stop);
    await waitUntil(async () => (await queues.depth(queues.queueUrl)) === 0, 'the create stored');
    await first.stop();

    // The erasure, then the create again (a redrive from the dead-letter queue, a producer's retry).
    await send(queues.queueUrl, ['gone@example.com'], 'erase');
    await send(queues.queueUrl, create);
    const second = await startFeeder({ sqs, queueUrl: queues.queueUrl, serviceUrl: stub.url });
    t.after(second.stop);
    await waitUntil(async () => (await queues.depth(queues.queueUrl)) === 0, 'both handled');
    await second.stop();

    assert.deepEqual(posted(stub), [
      ['/users', ['gone@example.com']],
      ['/erasures', ['gone@example.com']],
      ['/users', ['gone@example.com']],
    ]);
    const fed = second.handlerLogs.find((l) => l.message === 'sqs batch fed');
    assert.deepEqual(
      { records: fed.records, users: fed.users, erasures: fed.erasures, erased: fed.erased },
      { records: 2, users: 1, erasures: 1, erased: 1 },
      "one batch: the order is the feeder's",
    );
    assert.equal(await queues.depth(queues.dlqUrl), 0);
  });

  test('a FIFO group of upsert, erase and an older upsert: posted in that order', async (t) => {
    const stub = await startStubService(taken);
    t.after(() => stub.close());
    const queues = await createQueuePair(sqs, {
      visibilityTimeoutSeconds: 5,
      maxReceiveCount: 3,
      fifo: true,
    });
    t.after(() => queues.delete());
    const change = (/** @type {string} */ changedAt) => ({
      email: 'ordered@example.com',
      name: `as of ${changedAt}`,
      changedAt,
    });
    await send(queues.queueUrl, change('2024-05-02T00:00:00Z'));
    await send(queues.queueUrl, 'ordered@example.com', 'erase');
    await send(queues.queueUrl, change('2024-05-01T00:00:00Z'));

    const feeder = await startFeeder({
      sqs,
      queueUrl: queues.queueUrl,
      serviceUrl: stub.url,
      env: { CONFLICT_RESOLUTION: 'merge', POST_CONCURRENCY: '4' },
    });
    t.after(feeder.stop);
    await waitUntil(async () => (await queues.depth(queues.queueUrl)) === 0, 'the group handled');
    await feeder.stop();

    assert.deepEqual(
      stub.paths.map((route, i) => [route, stub.requests[i][0].changedAt]),
      [
        ['/users', '2024-05-02T00:00:00Z'],
        ['/erasures', undefined],
        ['/users', '2024-05-01T00:00:00Z'],
      ],
    );
    assert.deepEqual(stub.requests[1], [{ email: 'ordered@example.com' }]);
    assert.equal(stub.headers[1].prefer, undefined, 'an erasure has no Prefer');
    assert.equal(stub.headers[2].prefer, 'resolution=merge-duplicates, invalid=quarantine');
    const fed = feeder.handlerLogs.filter((l) => l.message === 'sqs batch fed');
    assert.deepEqual(
      fed.map((l) => l.records),
      [3],
      'one batch',
    );
    assert.equal(await queues.depth(queues.dlqUrl), 0);
  });

  test('a client that may not erase (403): its erase messages fail and return, not split; the upserts are stored; nothing in the dead-letter queue; once granted, applied', async (t) => {
    let granted = false;
    const stub = await startStubService((items, n, route) =>
      route === '/erasures' && !granted
        ? [403, { error: 'forbidden', message: 'this client may not erase' }]
        : taken(items, n, route),
    );
    t.after(() => stub.close());
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 1, maxReceiveCount: 5 });
    t.after(() => queues.delete());
    await send(queues.queueUrl, { email: 'kept@example.com', name: 'Kept' });
    await send(queues.queueUrl, ['a@example.com', 'b@example.com'], 'erase');
    await send(queues.queueUrl, { email: 'c@example.com' }, 'erase');

    const feeder = await startFeeder({
      sqs,
      queueUrl: queues.queueUrl,
      serviceUrl: stub.url,
      env: { INGEST_TOKEN: 'feeder-token' },
    });
    t.after(feeder.stop);
    await waitUntil(() => feeder.logs.some((l) => l.msg === 'batch done'), 'the first batch');
    const firstBatch = feeder.logs.find((l) => l.msg === 'batch done');
    assert.deepEqual(
      { messages: firstBatch.messages, deleted: firstBatch.deleted, failed: firstBatch.failed },
      { messages: 3, deleted: 1, failed: 2 },
    );
    assert.deepEqual(
      posted(stub),
      [
        ['/users', ['kept@example.com']],
        ['/erasures', ['a@example.com', 'b@example.com', 'c@example.com']],
      ],
      'one post of the erasures: no message is at fault, so none is split off',
    );
    const failures = feeder.handlerLogs.find((l) => l.message === 'messages not stored').failures;
    assert.deepEqual(
      failures.map((/** @type {any} */ f) => [f.kind, f.reason]),
      [
        ['unavailable', 'HTTP 403 forbidden'],
        ['unavailable', 'HTTP 403 forbidden'],
      ],
    );
    assert.equal(await queues.depth(queues.dlqUrl), 0);

    granted = true;
    await waitUntil(
      async () => (await queues.depth(queues.queueUrl)) === 0,
      'the erasures applied',
    );
    await feeder.stop();
    assert.deepEqual(stub.paths.at(-1), '/erasures');
    assert.deepEqual(
      stub.requests
        .at(-1)
        ?.map((/** @type {any} */ e) => e.email)
        .sort(),
      ['a@example.com', 'b@example.com', 'c@example.com'],
    );
    const said = feeder.handlerLogs.filter((l) => l.level === 'ERROR');
    assert.equal(said.length, 1, 'said once');
    assert.match(said[0].message, /refused the feeder's erasures \(HTTP 403\): its client may not/);
    assert.equal(await queues.depth(queues.dlqUrl), 0, 'nothing in the dead-letter queue');
  });
});

describe('npm run produce -- --erase / --erase-file', () => {
  const sqs = makeSqsClient();
  after(() => sqs.destroy());
  const produce = fileURLToPath(new URL('../../local/bin/produce.js', import.meta.url));

  test("to a FIFO queue: messages with operation=erase, the erasures as given, each in its user's group", async (t) => {
    const queues = await createQueuePair(sqs, {
      visibilityTimeoutSeconds: 30,
      maxReceiveCount: 5,
      fifo: true,
    });
    t.after(() => queues.delete());
    const dir = await mkdtemp(path.join(tmpdir(), 'sluice-erase-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'erase.txt');
    const stamped = { email: 'd@example.com', changedAt: '2024-05-01T10:00:00Z' };
    await writeFile(file, `c@example.com\n\n${JSON.stringify(stamped)}\n`);

    const producer = runNode(
      [
        produce,
        ...['--erase', 'a@example.com', 'B@example.com', '--erase-file', file],
        ...['--per-message', '2', '--message-groups', '4'],
      ],
      { env: { ...process.env, SQS_ENDPOINT: sqsEndpoint(), QUEUE_URL: queues.queueUrl } },
    );
    assert.equal(await producer.exited, 0, producer.err());
    const final = JSON.parse(producer.out().trim().split('\n').at(-1) ?? '{}');
    assert.deepEqual(
      { operation: final.operation, erasures: final.erasures, users: final.users },
      { operation: 'erase', erasures: 4, users: undefined },
    );

    /** @type {import('@aws-sdk/client-sqs').Message[]} */
    const seen = [];
    for (let i = 0; i < 20 && seen.length < final.messages; i++) {
      const out = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queues.queueUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
          MessageSystemAttributeNames: ['All'],
          MessageAttributeNames: ['All'],
        }),
      );
      for (const m of out.Messages ?? []) {
        seen.push(m);
        await sqs.send(
          new DeleteMessageCommand({ QueueUrl: queues.queueUrl, ReceiptHandle: m.ReceiptHandle }),
        );
      }
    }
    assert.equal(seen.length, final.messages);
    /** @type {unknown[]} */
    const erasures = [];
    for (const m of seen) {
      assert.deepEqual(m.MessageAttributes?.operation, {
        DataType: 'String',
        StringValue: 'erase',
      });
      for (const e of JSON.parse(/** @type {string} */ (m.Body))) {
        erasures.push(e);
        assert.equal(messageGroupOf(e, 4), m.Attributes?.MessageGroupId, "its user's group");
      }
    }
    assert.deepEqual(
      erasures.sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b))),
      ['B@example.com', 'a@example.com', 'c@example.com', stamped].sort((a, b) =>
        JSON.stringify(a).localeCompare(JSON.stringify(b)),
      ),
    );
  });
});

describe('erasures through the queue to the real service: producer → ElasticMQ → runner → handler → service → table', () => {
  const sqs = makeSqsClient();
  after(() => sqs.destroy());
  const ctx = useAppAndDatabase({ ERASURE_KEY: 'an erasure key of forty characters, test!' });

  /** @param {string} queueUrl @param {unknown} body @param {'erase'} [operation] */
  async function send(queueUrl, body, operation) {
    async function* one() {
      yield { body: JSON.stringify(body), users: 1 };
    }
    await sendMessages({ sqs, queueUrl, messages: one(), operation });
  }
  /** @param {string} email */
  const stored = async (email) =>
    (await ctx.db.pool.query('SELECT name FROM users WHERE email = $1', [email])).rows;

  test('an erase message, then the old create redelivered: not stored, nothing in the dead-letter queue', async (t) => {
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 5, maxReceiveCount: 3 });
    t.after(() => queues.delete());
    const email = `gone-${uniqueTag()}@example.com`;
    const create = { email, name: 'Gone' };
    await send(queues.queueUrl, create);
    const first = await startFeeder({
      sqs,
      queueUrl: queues.queueUrl,
      serviceUrl: ctx.app.baseUrl,
    });
    t.after(first.stop);
    await waitUntil(async () => (await queues.depth(queues.queueUrl)) === 0, 'the create stored');
    await first.stop();
    assert.equal((await stored(email)).length, 1);

    await send(queues.queueUrl, [email], 'erase');
    await send(queues.queueUrl, create);
    const second = await startFeeder({
      sqs,
      queueUrl: queues.queueUrl,
      serviceUrl: ctx.app.baseUrl,
    });
    t.after(second.stop);
    await waitUntil(async () => (await queues.depth(queues.queueUrl)) === 0, 'both handled');
    await second.stop();
    assert.deepEqual(await stored(email), [], 'erased, and not brought back');
    assert.equal(await queues.depth(queues.dlqUrl), 0);
    const tombstones = await ctx.db.pool.query('SELECT count(*)::int AS n FROM erasures');
    assert.ok(tombstones.rows[0].n >= 1);
  });

  test('a FIFO group of upsert, erase and an older upsert: the user stays erased', async (t) => {
    const queues = await createQueuePair(sqs, {
      visibilityTimeoutSeconds: 5,
      maxReceiveCount: 3,
      fifo: true,
    });
    t.after(() => queues.delete());
    const email = `ordered-${uniqueTag()}@example.com`;
    const change = (/** @type {string} */ changedAt) => ({
      email,
      name: `as of ${changedAt}`,
      changedAt,
    });
    await send(queues.queueUrl, change('2024-05-02T00:00:00Z'));
    await send(queues.queueUrl, { email, changedAt: '2024-05-03T00:00:00Z' }, 'erase');
    await send(queues.queueUrl, change('2024-05-01T00:00:00Z'));
    const feeder = await startFeeder({
      sqs,
      queueUrl: queues.queueUrl,
      serviceUrl: ctx.app.baseUrl,
      env: { CONFLICT_RESOLUTION: 'merge', POST_CONCURRENCY: '4' },
    });
    t.after(feeder.stop);
    await waitUntil(async () => (await queues.depth(queues.queueUrl)) === 0, 'the group handled');
    await feeder.stop();
    assert.deepEqual(await stored(email), [], 'the older upsert did not bring it back');
    assert.equal(await queues.depth(queues.dlqUrl), 0);
  });
});
