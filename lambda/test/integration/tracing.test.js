import assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { runNode } from '../../../test/support/child-process.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { startOtlpReceiver } from '../../../test/support/otlp-receiver.js';
import { startServerProcess } from '../../../test/support/server-process.js';
import { uniqueTag } from '../../../test/support/users.js';
import { createQueuePair, makeSqsClient, sqsEndpoint, waitUntil } from '../support/queues.js';

const bin = (/** @type {string} */ name) =>
  fileURLToPath(new URL(`../../local/bin/${name}`, import.meta.url));
// OTLP's span kinds.
const SERVER = 2;
const CLIENT = 3;
const PRODUCER = 4;
const CONSUMER = 5;

describe('tracing from the producer through SQS, the feeder and the service to PostgreSQL', () => {
  const sqs = makeSqsClient();
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startOtlpReceiver>>} */ let receiver;
  /** @type {Awaited<ReturnType<typeof startServerProcess>>} */ let service;
  /** @type {ReturnType<typeof runNode> | undefined} */ let feeder;
  /** @type {Record<string, string>} */ let otel;
  before(async () => {
    db = await createTestDatabase();
    receiver = await startOtlpReceiver();
    // The receiver reads JSON; spans leave every 100 ms rather than every 5 s.
    otel = {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    };
    service = await startServerProcess({ DATABASE_URL: db.url, ...otel });
  });
  after(async () => {
    if (feeder && feeder.child.exitCode === null) {
      feeder.child.kill('SIGKILL');
      await feeder.exited;
    }
    await service?.stop();
    await receiver?.close();
    await db?.drop();
    sqs.destroy();
  });

  test("one message: the feeder's span links to the producer's, the service and pg spans are in its trace, no user data anywhere", async () => {
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 30, maxReceiveCount: 5 });
    const env = {
      ...process.env,
      SQS_ENDPOINT: sqsEndpoint(),
      QUEUE_URL: queues.queueUrl,
      SERVICE_URL: service.baseUrl,
      ...otel,
    };
    const t = uniqueTag();
    const email = `${t}-traced@example.com`;
    // Named apart from the tag: the command line is on the producer's resource (process.command_args).
    const file = path.join(os.tmpdir(), `sluice-tracing-${process.pid}.ndjson`);
    await writeFile(file, `${JSON.stringify({ email, name: `Secret Name ${t}` })}\n`);

    const producer = runNode([bin('produce.js'), '--file', file], { env });
    assert.equal(await producer.exited, 0, producer.err());
    await rm(file, { force: true });
    const send = (await receiver.waitFor((all) => all.some((s) => s.kind === PRODUCER))).find(
      (s) => s.kind === PRODUCER,
    );
    assert.ok(send);
    assert.equal(send.service, 'sluice-producer');
    assert.equal(send.attributes['messaging.system'], 'aws_sqs');

    feeder = runNode([bin('feeder.js')], {
      env: { ...env, BATCH_SIZE: '10', BATCH_WINDOW_MS: '100', RECEIVERS: '1' },
    });
    await waitUntil(
      async () => (await db.usersByEmail([email])).size === 1,
      'the message to be stored',
    );

    const spans = await receiver.waitFor(
      (all) =>
        all.some((s) => s.kind === CONSUMER) &&
        all.some(
          (s) =>
            s.service === 'sluice-service' &&
            s.kind === CLIENT &&
            s.attributes['db.operation.name'] === 'INSERT',
        ),
    );
    const consumer = /** @type {import('../../../test/support/otlp-receiver.js').ReceivedSpan} */ (
      spans.find((s) => s.kind === CONSUMER)
    );
    assert.equal(consumer.service, 'sluice-feeder');
    assert.equal(consumer.attributes['messaging.batch.message_count'], 1);
    assert.deepEqual(
      consumer.links.map((l) => [l.traceId, l.spanId]),
      [[send.traceId, send.spanId]],
      "one link, to the producer's span",
    );
    assert.equal(typeof consumer.links[0].attributes['messaging.message.id'], 'string');

    // The service's spans are in the feeder's trace: its HTTP span is the invocation span's child.
    const trace = spans.filter((s) => s.traceId === consumer.traceId);
    const http = trace.find((s) => s.service === 'sluice-service' && s.kind === SERVER);
    assert.ok(http, "the service's HTTP span is in the feeder's trace");
    assert.equal(http.parentSpanId, consumer.spanId);
    const write = trace.find((s) => s.name === 'sluice.write');
    const group = trace.find((s) => s.name === 'sluice.group_commit.write');
    assert.ok(write && group);
    assert.ok(group.links.some((l) => l.spanId === write.spanId));
    // The feeder's Idempotency-Key makes the group a transaction: BEGIN, its INSERT, COMMIT.
    const statements = trace.filter(
      (s) => s.kind === CLIENT && s.service === 'sluice-service' && s.parentSpanId === group.spanId,
    );
    assert.ok(statements.length > 0, 'the pg spans, in the same trace');
    assert.ok(
      statements.some((s) => s.attributes['db.operation.name'] === 'INSERT'),
      statements.map((s) => s.attributes['db.operation.name']).join(', '),
    );

    // No user data on any span: neither the email nor the name, in any body the receiver got.
    for (const body of receiver.raw) {
      const at = body.indexOf(t);
      assert.ok(
        at === -1,
        `no email or name in what was exported: ${body.slice(Math.max(0, at - 300), at + 100)}`,
      );
      assert.ok(!body.includes('@example.com'));
    }

    feeder.child.kill('SIGTERM');
    assert.equal(await feeder.exited, 0, feeder.err());
  });
});
