import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { after, afterEach, before, beforeEach, describe, test } from 'node:test';
import { parse } from 'yaml';
import { freePort } from '@sluice/db/local-postgres';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { lintTools } from '../../../test/support/python-tools.js';
import { captureHandlerOutput } from '../support/handler-output.js';
import { startSecretsManagerStub } from '../support/secrets-manager-stub.js';
import { lambdaContext, makeRecord } from '../support/sqs-events.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const BUILD = path.join(ROOT, '.aws-sam', 'build');
const MAX_ARTIFACT_BYTES = 3 * 1024 * 1024;

// What ships is what is tested: `sam build` as a deployer runs it, then the handler of the bundle
// it made, invoked with SQS events against the real service on PostgreSQL, with the token read
// from Secrets Manager's protocol by the SDK inside the bundle.
describe('the feeder artifact (sam build)', () => {
  /** @type {any} */ let builtFunction;
  /** @type {string} */ let artifact;
  /** @type {string} */ let lambdaTask;
  before(() => {
    const sam = lintTools()('sam');
    // A deployer's shell: npm's node_modules/.bin is not on PATH there, as it is under `npm test`.
    const PATH = (process.env.PATH ?? '')
      .split(path.delimiter)
      .filter((p) => !p.includes(`node_modules${path.sep}.bin`))
      .join(path.delimiter);
    const r = spawnSync(sam, ['build'], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { ...process.env, PATH, SAM_CLI_TELEMETRY: '0' },
      timeout: 600_000,
    });
    assert.equal(r.status, 0, `sam build failed:\n${r.stdout}${r.stderr}${r.error?.message ?? ''}`);
    builtFunction = parse(readFileSync(path.join(BUILD, 'template.yaml'), 'utf8')).Resources
      .FeederFunction;
    artifact = path.join(BUILD, builtFunction.Properties.CodeUri);
    // As in Lambda's /var/task: the artifact alone, where no node_modules of the repository is reachable.
    lambdaTask = mkdtempSync(path.join(os.tmpdir(), 'sluice-lambda-task-'));
    cpSync(artifact, lambdaTask, { recursive: true });
  });
  after(() => rmSync(lambdaTask, { recursive: true, force: true }));

  test('holds the bundle and its source map, nothing else, within 3 MB', () => {
    assert.deepEqual(readdirSync(artifact, { recursive: true }).sort(), [
      'handler.mjs',
      'handler.mjs.map',
    ]);
    const bytes = readdirSync(artifact).reduce(
      (sum, f) => sum + statSync(path.join(artifact, f)).size,
      0,
    );
    assert.ok(bytes <= MAX_ARTIFACT_BYTES, `${bytes} bytes`);
    // The sizes feeder.md states, within 5 % (a dependency's patch release moves them a little).
    const stated = /\*\*2 files, ([\d.]+) MB\*\* \(a (\d+) KB bundle and a (\d+) KB map\)/.exec(
      readFileSync(path.join(ROOT, 'docs', 'feeder.md'), 'utf8'),
    );
    assert.ok(
      stated,
      'docs/feeder.md states the artifact\'s size as "**2 files, N MB** (a N KB bundle and a N KB map)"',
    );
    const sizeOf = (/** @type {string} */ f) => statSync(path.join(artifact, f)).size;
    for (const [what, said, actual] of /** @type {const} */ ([
      ['the artifact', Number(stated[1]) * 1e6, bytes],
      ['the bundle', Number(stated[2]) * 1e3, sizeOf('handler.mjs')],
      ['the map', Number(stated[3]) * 1e3, sizeOf('handler.mjs.map')],
    ])) {
      assert.ok(
        Math.abs(said - actual) <= 0.05 * actual,
        `docs/feeder.md says ${what} is ${said / 1e3} KB; it is ${(actual / 1e3).toFixed(0)} KB`,
      );
    }
    assert.equal(builtFunction.Properties.Handler, 'handler.handler');
    // SAM turns the source map on for the function, as it was measured (bench:feeder-cold-start).
    assert.equal(
      builtFunction.Properties.Environment.Variables.NODE_OPTIONS.trim(),
      '--enable-source-maps',
    );
  });

  test("bundles the function's code and dependencies only: no local tool, no SQS client, no test", () => {
    const { sources } = JSON.parse(readFileSync(path.join(artifact, 'handler.mjs.map'), 'utf8'));
    const ours = sources.filter((/** @type {string} */ s) => !s.includes('node_modules/'));
    assert.deepEqual(
      ours
        .filter((/** @type {string} */ s) => s.includes('lambda/src/'))
        .map((/** @type {string} */ s) => path.basename(s))
        .sort(),
      [
        'batch-response.js',
        'chunks.js',
        'config.js',
        'errors.js',
        'failure-ledger.js',
        'feed-records.js',
        'feeder.js',
        'handler.js',
        'ingest-token.js',
        'observability.js',
        'records.js',
        'retry.js',
        'service-client.js',
        'traceparent.js',
        'tracing.js',
      ],
    );
    // The handler's code and the configuration loader it shares (@sluice/env); never db/ or service/.
    assert.deepEqual(
      ours
        .filter((/** @type {string} */ s) => !s.includes('lambda/src/'))
        .filter((/** @type {string} */ s) => !s.includes('env/src/')),
      [],
    );
    const packages = new Set(
      sources
        .map((/** @type {string} */ s) => s.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/)?.[1])
        .filter(Boolean),
    );
    for (const needed of [
      '@aws-lambda-powertools/logger',
      '@aws-lambda-powertools/metrics',
      '@aws-sdk/client-secrets-manager',
    ])
      assert.ok(packages.has(needed), needed);
    for (const absent of ['@aws-sdk/client-sqs', 'cli-progress', 'esbuild'])
      assert.ok(!packages.has(absent), absent);
    // Tracing's API only: the SDK that records spans is the ADOT layer's (docs/tracing.md).
    assert.deepEqual(
      [...packages].filter((p) => p.startsWith('@opentelemetry/')),
      ['@opentelemetry/api'],
    );
  });

  describe('the built handler, invoked with SQS events', () => {
    const TOKEN = 'artifact-test-token';
    /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
    /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
    /** @type {Awaited<ReturnType<typeof startSecretsManagerStub>>} */ let secrets;
    /** @type {ReturnType<typeof captureHandlerOutput>} */ let output;
    const savedEnv = { ...process.env };
    before(async () => {
      db = await createTestDatabase();
      app = await startTestApp({
        databaseUrl: db.url,
        env: { INGEST_TOKEN: TOKEN, LOG_LEVEL: 'warn' },
      });
      secrets = await startSecretsManagerStub({ token: TOKEN });
    });
    after(async () => {
      await secrets?.close();
      await app?.close();
      await db?.drop();
    });
    beforeEach(() => {
      output = captureHandlerOutput();
    });
    afterEach(() => {
      output.restore();
      for (const key of Object.keys(process.env)) if (!(key in savedEnv)) delete process.env[key];
      Object.assign(process.env, savedEnv);
    });

    /**
     * A cold start: the bundle loaded afresh from the Lambda task folder, with the function's
     * environment as on AWS (the token's secret ARN, never the token).
     * @param {string} serviceUrl @param {Record<string, string>} [env]
     */
    async function coldStart(serviceUrl, env = {}) {
      Object.assign(
        process.env,
        secrets.env,
        {
          SERVICE_URL: serviceUrl,
          RETRY_BASE_MS: '50',
          RETRY_MAX_MS: '200',
          SAFETY_MARGIN_MS: '500',
          INVALID_USERS: 'quarantine',
        },
        env,
      );
      delete process.env.INGEST_TOKEN;
      const url = `${pathToFileURL(path.join(lambdaTask, 'handler.mjs')).href}?cold=${Math.random()}`;
      return /** @type {typeof import('../../src/handler.js').handler} */ (
        (await import(url)).handler
      );
    }
    const user = (/** @type {string} */ tag) => ({
      email: `${tag}@artifact.test`,
      name: `Artifact ${tag}`,
    });

    test('good messages are stored, with the token fetched from Secrets Manager once', async () => {
      const handler = await coldStart(app.baseUrl);
      const fetchesBefore = secrets.requests.length;
      const event = {
        Records: [makeRecord(user('one')), makeRecord([user('two'), user('three')])],
      };
      assert.deepEqual(await handler(event, lambdaContext(30_000)), { batchItemFailures: [] });
      assert.deepEqual(
        await handler({ Records: [makeRecord(user('four'))] }, lambdaContext(30_000)),
        { batchItemFailures: [] },
      );
      const stored = await db.usersByEmail(
        ['one', 'two', 'three', 'four'].map((t) => `${t}@artifact.test`),
      );
      assert.equal(stored.size, 4);
      assert.deepEqual(
        secrets.requests.slice(fetchesBefore).map((r) => r.target),
        ['secretsmanager.GetSecretValue'],
      );
      assert.match(
        secrets.requests.at(-1)?.authorization ?? '',
        /^AWS4-HMAC-SHA256 Credential=local\//,
      );
      assert.deepEqual(
        output.logs.map((l) => [l.message, l.usersStored]),
        [
          ['sqs batch fed', 3],
          ['sqs batch fed', 1],
        ],
      );
      assert.equal(output.metrics.length, 2);
      assert.ok(!JSON.stringify(output.logs).includes(TOKEN), 'the token never reaches a log line');
    });

    test('a poison message is reported alone; the others are stored; an invalid user is set aside by default, or its message fails with INVALID_USERS=refuse', async () => {
      const good = makeRecord([user('good-1'), user('good-2')]);
      const badJson = makeRecord('{"email": ');
      const invalid = makeRecord([user('good-3'), { email: 'not-an-email', name: 'Bad' }]);
      const quarantining = await coldStart(app.baseUrl);
      const kept = await quarantining({ Records: [good, badJson, invalid] }, lambdaContext(30_000));
      assert.deepEqual(
        kept.batchItemFailures.map((f) => f.itemIdentifier),
        [badJson.messageId],
      );
      assert.equal(output.logs.findLast((l) => l.message === 'sqs batch fed')?.quarantined, 1);
      assert.equal((await db.usersByEmail(['good-3@artifact.test'])).size, 1);
      await db.pool.query("DELETE FROM users WHERE email LIKE 'good-%'");

      const handler = await coldStart(app.baseUrl, { INVALID_USERS: 'refuse' });
      const result = await handler({ Records: [good, badJson, invalid] }, lambdaContext(30_000));
      assert.deepEqual(
        result.batchItemFailures.map((f) => f.itemIdentifier).sort(),
        [badJson.messageId, invalid.messageId].sort(),
      );
      assert.deepEqual(
        [
          ...(
            await db.usersByEmail([
              'good-1@artifact.test',
              'good-2@artifact.test',
              'good-3@artifact.test',
            ])
          ).keys(),
        ].sort(),
        ['good-1@artifact.test', 'good-2@artifact.test'],
      );
      assert.equal(output.logs.findLast((l) => l.message === 'sqs batch fed')?.poisonMessages, 2);
      assert.deepEqual(
        output.logs
          .at(-1)
          ?.failures.map((/** @type {any} */ f) => f.messageId)
          .sort(),
        [badJson.messageId, invalid.messageId].sort(),
        'why each failed is logged',
      );
    });

    test("a FIFO batch: a group's failed message is reported with the group's later ones; other groups are stored", async () => {
      const handler = await coldStart(app.baseUrl, { INVALID_USERS: 'refuse' });
      const a1 = makeRecord(user('fifo-a1'), { group: 'A' });
      const a2 = makeRecord([user('fifo-a2'), { email: 'not-an-email', name: 'Bad' }], {
        group: 'A',
      });
      const a3 = makeRecord(user('fifo-a3'), { group: 'A' });
      const b1 = makeRecord(user('fifo-b1'), { group: 'B' });
      const result = await handler({ Records: [a1, b1, a2, a3] }, lambdaContext(30_000));
      assert.deepEqual(
        result.batchItemFailures.map((f) => f.itemIdentifier).sort(),
        [a2.messageId, a3.messageId].sort(),
      );
      assert.deepEqual(
        [
          ...(
            await db.usersByEmail(['a1', 'a2', 'a3', 'b1'].map((t) => `fifo-${t}@artifact.test`))
          ).keys(),
        ].sort(),
        ['fifo-a1@artifact.test', 'fifo-b1@artifact.test'],
      );
      assert.equal(output.logs.findLast((l) => l.message === 'sqs batch fed')?.heldMessages, 1);
    });

    test('an outage (the service answers 503: its database is gone) throws, so Lambda returns the batch and backs off', async () => {
      const downDb = await startTestApp({
        databaseUrl: `postgres://sluice:x@127.0.0.1:${await freePort()}/gone`,
        env: { INGEST_TOKEN: TOKEN, LOG_LEVEL: 'fatal' },
      });
      try {
        const handler = await coldStart(downDb.baseUrl);
        const records = [makeRecord(user('outage-1')), makeRecord([user('outage-2')])];
        await assert.rejects(handler({ Records: records }, lambdaContext(5_000)), (err) => {
          assert.equal(/** @type {Error} */ (err).name, 'ServiceUnavailableError');
          assert.match(/** @type {Error} */ (err).message, /could not take any of 2 messages/);
          return true;
        });
        assert.ok(
          /** @type {number} */ (
            output.logs.findLast((l) => l.message === 'sqs batch fed')?.retries
          ) > 0,
          'it retried while the invocation had time',
        );
      } finally {
        await downDb.close();
      }
      assert.equal(
        (await db.usersByEmail(['outage-1@artifact.test', 'outage-2@artifact.test'])).size,
        0,
      );
    });
  });

  test("the token rotation function: its own bundle, which runs the four steps against Secrets Manager's protocol", async (t) => {
    const built = parse(readFileSync(path.join(BUILD, 'template.yaml'), 'utf8')).Resources
      .TokenRotationFunction;
    const folder = path.join(BUILD, built.Properties.CodeUri);
    assert.deepEqual(readdirSync(folder, { recursive: true }).sort(), [
      'rotate-token.mjs',
      'rotate-token.mjs.map',
    ]);
    const { sources } = JSON.parse(readFileSync(path.join(folder, 'rotate-token.mjs.map'), 'utf8'));
    assert.deepEqual(
      sources
        .filter(
          (/** @type {string} */ s) => !s.includes('node_modules/') && !s.includes('env/src/'),
        )
        .map((/** @type {string} */ s) => path.basename(s)),
      ['rotate-token.js'],
    );
    const task = mkdtempSync(path.join(os.tmpdir(), 'sluice-rotation-task-'));
    t.after(() => rmSync(task, { recursive: true, force: true }));
    cpSync(folder, task, { recursive: true });
    const secrets = await startSecretsManagerStub({
      token: JSON.stringify({ feeder: 'before-rotation' }),
    });
    const saved = { ...process.env };
    t.after(async () => {
      for (const key of Object.keys(process.env)) if (!(key in saved)) delete process.env[key];
      Object.assign(process.env, saved);
      await secrets.close();
    });
    Object.assign(process.env, secrets.env, { ROTATION_WAIT_MS: '10' });
    const { handler } = await import(pathToFileURL(path.join(task, 'rotate-token.mjs')).href);
    const version = secrets.startRotation();
    for (const Step of ['createSecret', 'setSecret', 'testSecret', 'finishSecret'])
      await handler({
        Step,
        SecretId: secrets.env.INGEST_TOKEN_SECRET_ARN,
        ClientRequestToken: version,
      });
    const rotated = JSON.parse(/** @type {string} */ (secrets.valueAt('AWSCURRENT')));
    assert.match(rotated.feeder, /^[\w-]{48}$/);
    assert.equal(
      JSON.parse(/** @type {string} */ (secrets.valueAt('AWSPREVIOUS'))).feeder,
      'before-rotation',
    );
  });

  test('the folder sam build writes is ignored by git', () => {
    assert.ok(existsSync(BUILD));
    const r = spawnSync('git', ['check-ignore', '-q', path.join(BUILD, 'template.yaml')], {
      cwd: ROOT,
    });
    assert.equal(r.status, 0, '.aws-sam/ must stay out of git');
  });
});
