import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { setEnv } from '../../../test/support/env.js';
import { packMessages, sendMessages } from '../../local/producer.js';
import { rotate } from '../../src/rotate-token.js';
import { startFeeder } from '../support/pipeline.js';
import { createQueuePair, makeSqsClient, waitUntil } from '../support/queues.js';
import { SECRET_ARN, startSecretsManagerStub } from '../support/secrets-manager-stub.js';

const REFRESH_MS = 200;
const sleep = (/** @type {number} */ ms) => new Promise((resolve) => setTimeout(resolve, ms));
const newToken = () => randomBytes(24).toString('base64url');
// The test's own posts, told apart from the feeder's in the access log by their query (ignored by the service).
const PROBE_URL = '/users?probe=rotation';
// As the access log writes it: of a query, only its parameters' names.
const PROBE_LOGGED = '/users?probe';

/**
 * Whether the service accepts `token`: an empty batch is refused 400 when it does, 401 when not.
 * @param {Awaited<ReturnType<typeof startTestApp>>} app @param {string} token
 */
async function probe(app, token) {
  const res = await fetch(`${app.baseUrl}${PROBE_URL}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: '[]',
  });
  await res.arrayBuffer();
  return res.status;
}

/**
 * A producer that keeps sending until stopped: four messages of 5 users every few milliseconds, so the
 * feeder posts all through the rotation (POST_CHUNK_ITEMS=5: a post per message).
 * @param {import('@aws-sdk/client-sqs').SQSClient} sqs @param {string} queueUrl @param {string} tag
 */
function keepProducing(sqs, queueUrl, tag) {
  let producing = true;
  let made = 0;
  async function* users() {
    while (producing) {
      for (let i = 0; i < 20; i++)
        yield { email: `${tag}-${made++}@rotation.example`, name: `Rotation ${made}` };
      await sleep(1);
    }
  }
  const sent = sendMessages({ sqs, queueUrl, messages: packMessages(users(), 5), concurrency: 4 });
  return {
    /** Stops, and resolves with how many users were sent. */
    async stop() {
      producing = false;
      return (await sent).users;
    },
  };
}

/**
 * The feeder's posts answered 401 because their token was rotated away: the feeder reads its
 * secret again, posts again with the new token, and nothing fails. Run while the feeder drains a
 * real queue (ElasticMQ) into the real service and PostgreSQL, with posts every few milliseconds.
 */
describe('token rotation under load: zero failed posts, zero dead letters, nothing lost', () => {
  const sqs = makeSqsClient();
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  before(async () => {
    db = await createTestDatabase();
  });
  after(async () => {
    await db?.drop();
    sqs.destroy();
  });

  /**
   * The drain, with `rotateDuring` run once posts are flowing; returns what the assertions read.
   * @param {{ app: Awaited<ReturnType<typeof startTestApp>>, secrets: Awaited<ReturnType<typeof startSecretsManagerStub>>, tag: string,
   *   rotateDuring: () => Promise<void> }} options
   */
  async function drainThrough({ app, secrets, tag, rotateDuring }) {
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 20, maxReceiveCount: 2 });
    const feeder = await startFeeder({
      sqs,
      queueUrl: queues.queueUrl,
      serviceUrl: app.baseUrl,
      batchSize: 20,
      functionTimeoutMs: 10_000,
      env: { ...secrets.env, POST_CHUNK_ITEMS: '5', POST_CONCURRENCY: '4' },
    });
    const started = performance.now();
    try {
      const producer = keepProducing(sqs, queues.queueUrl, tag);
      const before = await db.countUsers();
      await waitUntil(async () => (await db.countUsers()) - before >= 200, 'posts to flow', 30_000);
      await rotateDuring();
      await sleep(1000);
      const sent = await producer.stop();
      await waitUntil(
        async () =>
          (await db.countUsers()) - before >= sent && (await queues.depth(queues.queueUrl)) === 0,
        `all ${sent} users stored`,
        60_000,
      );
      const totals = await feeder.stop();
      const seconds = (performance.now() - started) / 1000;
      const stored = (await db.countUsers()) - before;
      const deadLetters = await queues.depth(queues.dlqUrl);
      await queues.delete();
      return { sent, stored, totals, deadLetters, seconds, handlerLogs: feeder.handlerLogs };
    } finally {
      await feeder.stop();
    }
  }

  /**
   * @param {Awaited<ReturnType<typeof drainThrough>>} run @param {Awaited<ReturnType<typeof startTestApp>>} app
   * @param {import('node:test').TestContext} t
   */
  function assertNothingLost(run, app, t) {
    assert.equal(run.stored, run.sent, 'every user sent is in the table');
    assert.equal(run.deadLetters, 0, 'no message in the dead-letter queue');
    assert.equal(run.totals.failed, 0, 'no message failed: no 401 exhausted a post');
    assert.equal(run.totals.handlerErrors ?? 0, 0);
    const refused = app.logs.filter(
      (l) => l.msg === 'request completed' && l.res?.statusCode === 401,
    );
    assert.ok(
      refused.every((l) => l.client === undefined),
      'a refusal names no client',
    );
    // The feeder's own posts refused, not the test's probes: its old token met the service after the
    // rotation, and since nothing failed, it read the new one and posted again.
    const feederRefused = refused.filter((l) => l.req?.url === '/users');
    assert.ok(
      refused.some((l) => l.req?.url === PROBE_LOGGED),
      'the probes are in the access log, told apart',
    );
    assert.ok(
      feederRefused.length >= 1,
      "the feeder's old token was refused at least once (the re-read was exercised)",
    );
    const posts = run.handlerLogs.reduce((n, l) => n + (l.posts ?? 0), 0);
    t.diagnostic(
      `${run.sent} users, ${posts} posts in ${run.seconds.toFixed(1)} s (one every ${Math.round((run.seconds * 1000) / posts)} ms), ${feederRefused.length} answered 401 and posted again with the new token`,
    );
  }

  test("a token file: the second token added, the feeder's secret switched to it, the first removed", async (t) => {
    const [tokenA, tokenB] = [newToken(), newToken()];
    const dir = mkdtempSync(path.join(os.tmpdir(), 'sluice-rotation-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'tokens.json');
    /** Written as an operator's tooling would: a new file renamed over the old. @param {object} tokens */
    const writeTokens = async (tokens) => {
      await writeFile(`${file}.new`, JSON.stringify(tokens));
      await rename(`${file}.new`, file);
    };
    writeFileSync(file, JSON.stringify({ 'feeder-1': tokenA }));
    const app = await startTestApp({
      databaseUrl: db.url,
      env: {
        INGEST_TOKENS_FILE: file,
        INGEST_TOKENS_REFRESH_MS: String(REFRESH_MS),
        LOG_LEVEL: 'info',
      },
    });
    t.after(() => app.close());
    const secrets = await startSecretsManagerStub({ token: JSON.stringify({ feeder: tokenA }) });
    t.after(() => secrets.close());

    const run = await drainThrough({
      app,
      secrets,
      tag: 'file',
      async rotateDuring() {
        await writeTokens({ 'feeder-1': tokenA, 'feeder-2': tokenB });
        await waitUntil(
          async () => (await probe(app, tokenB)) === 400,
          'the service to accept the second token',
          5000,
        );
        secrets.put(JSON.stringify({ feeder: tokenB }));
        await writeTokens({ 'feeder-2': tokenB });
        await waitUntil(
          async () => (await probe(app, tokenA)) === 401,
          'the service to refuse the first token',
          5000,
        );
      },
    });
    assertNothingLost(run, app, t);
    const metrics = await app.metrics.registry.metrics();
    assert.match(metrics, /sluice_auth_accepted_total\{client="feeder-1"\} [1-9]/);
    assert.match(metrics, /sluice_auth_accepted_total\{client="feeder-2"\} [1-9]/);
  });

  test('a Secrets Manager secret rotated by the rotation function: AWSPENDING accepted, then AWSCURRENT moved', async (t) => {
    const secrets = await startSecretsManagerStub({
      token: JSON.stringify({ feeder: newToken() }),
    });
    t.after(() => secrets.close());
    // The service's own SDK client reads the stand-in (its endpoint and credentials from the environment).
    const restoreEnv = setEnv(secrets.env);
    t.after(restoreEnv);
    const app = await startTestApp({
      databaseUrl: db.url,
      env: {
        INGEST_TOKENS_SECRET_ARN: SECRET_ARN,
        INGEST_TOKENS_REFRESH_MS: String(REFRESH_MS),
        LOG_LEVEL: 'info',
      },
    });
    t.after(() => app.close());
    const client = new SecretsManagerClient({});
    t.after(() => client.destroy());

    const run = await drainThrough({
      app,
      secrets,
      tag: 'secret',
      async rotateDuring() {
        const version = secrets.startRotation();
        // setSecret waits for the services' refresh, as ROTATION_WAIT_MS does on AWS.
        const deps = { client, waitMs: 3 * REFRESH_MS, sleep };
        for (const step of /** @type {const} */ ([
          'createSecret',
          'setSecret',
          'testSecret',
          'finishSecret',
        ])) {
          await rotate({ Step: step, SecretId: SECRET_ARN, ClientRequestToken: version }, deps);
          if (step !== 'testSecret') continue;
          // What testSecret vouches for, checked where it counts: after setSecret's wait the service
          // accepts the pending token (an empty body is refused 400, not 401) before any client has it.
          const pending = JSON.parse(/** @type {string} */ (secrets.valueAt('AWSPENDING'))).feeder;
          assert.equal(
            await probe(app, pending),
            400,
            'the pending token is accepted once testSecret passes',
          );
        }
        const old = JSON.parse(/** @type {string} */ (secrets.valueAt('AWSPREVIOUS'))).feeder;
        await waitUntil(
          async () => (await probe(app, old)) === 401,
          'the service to stop accepting the previous token',
          5000,
        );
      },
    });
    assertNothingLost(run, app, t);
    const reads = secrets.requests.filter(
      (r) => r.target === 'secretsmanager.GetSecretValue' && r.versionStage === 'AWSPENDING',
    );
    assert.ok(reads.length >= 3, 'the service read the pending stage on its refreshes');
  });
});
