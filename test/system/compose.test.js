import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { before, describe, test } from 'node:test';
import pg from 'pg';
import { migrationUrlFromEnv } from '@sluice/db/database-url';
import { loadFeederConfig } from '../../lambda/src/config.js';
import { loadRunnerConfig, loadSqsConfig } from '../../lambda/local/sqs-config.js';
import { findComposeCli } from '../../scripts/compose-cli.js';
import { loadConfig } from '../../service/src/config.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const read = (/** @type {string} */ file) => readFileSync(path.join(ROOT, file), 'utf8');

describe('docker-compose.yml and the Dockerfiles', () => {
  /** @type {string[]} */ let compose;
  /** @type {any} */ let config;
  /** @param {string[]} args @param {string} envFile */
  const run = (args, envFile) => {
    const [cmd, ...pre] = compose;
    const r = spawnSync(
      cmd,
      [
        ...pre,
        '--project-directory',
        ROOT,
        '-f',
        path.join(ROOT, 'docker-compose.yml'),
        '--env-file',
        envFile,
        ...args,
      ],
      {
        cwd: ROOT,
        encoding: 'utf8',
        env: { PATH: process.env.PATH, HOME: process.env.HOME },
      },
    );
    return { code: r.status, out: r.stdout, err: r.stderr };
  };
  before(async () => {
    compose = await findComposeCli();
    const r = run(
      ['--profile', 'tools', '--profile', 'bench', 'config', '--format', 'json'],
      path.join(ROOT, '.env.example'),
    );
    assert.equal(r.code, 0, r.err);
    config = JSON.parse(r.out);
  });

  test('`docker compose config` accepts the file, with every service and profile', () => {
    assert.deepEqual(Object.keys(config.services).sort(), [
      'elasticmq',
      'feeder',
      'k6',
      'migrate',
      'postgres',
      'producer',
      'service',
    ]);
    assert.deepEqual(config.services.producer.profiles, ['tools']);
    assert.deepEqual(config.services.k6.profiles, ['bench']);
    assert.match(config.services.postgres.image, /^postgres:\d+$/);
    assert.match(config.services.elasticmq.image, /^softwaremill\/elasticmq-native:/);
  });

  test('without the secrets from .env it refuses to start, naming the variable', () => {
    const empty = path.join(mkdtempSync(path.join(os.tmpdir(), 'sluice-env-')), '.env');
    writeFileSync(empty, '');
    const r = run(['config'], empty);
    assert.notEqual(r.code, 0);
    assert.match(r.err, /POSTGRES_PASSWORD|INGEST_TOKEN/);
  });

  test('no secret is written in the compose file itself', () => {
    const text = read('docker-compose.yml');
    for (const line of read('.env.example')
      .split('\n')
      .filter((l) => l.includes('='))) {
      assert.ok(
        !text.includes(line.split('=')[1]),
        `${line.split('=')[0]}'s value is not in the file`,
      );
    }
    assert.match(read('.gitignore'), /^\.env$/m);
  });

  test('every variable the service, the feeder and the producer read is set or has a working default', () => {
    const env = (/** @type {string} */ name) => config.services[name].environment;
    const service = loadConfig(env('service'));
    assert.equal(new URL(/** @type {string} */ (service.databaseUrl)).hostname, 'postgres');
    assert.ok(service.auth.ingestToken);
    assert.equal(
      new URL(/** @type {string} */ (migrationUrlFromEnv(env('migrate')))).hostname,
      'postgres',
    );
    const feeder = { ...loadRunnerConfig(env('feeder')), ...loadFeederConfig(env('feeder')) };
    assert.equal(new URL(feeder.serviceUrl).hostname, 'service');
    assert.equal(new URL(/** @type {string} */ (feeder.endpoint)).hostname, 'elasticmq');
    assert.equal(feeder.ingestToken, service.auth.ingestToken);
    assert.equal(
      new URL(/** @type {string} */ (loadSqsConfig(env('producer')).endpoint)).hostname,
      'elasticmq',
    );
    assert.equal(new URL(env('k6').BASE_URL).hostname, 'service');
  });

  // As a person writes it in .env: unquoted (a # after no space is no comment), or single-quoted.
  for (const line of [
    'POSTGRES_PASSWORD=a/b#c%d@e:f%zz',
    "POSTGRES_PASSWORD='a/b #c%d@e:f%zz$x'",
  ]) {
    test(`a password holding / # % @ : reaches PostgreSQL, the migrations and the service as it is (${line})`, () => {
      const password = line.slice(line.indexOf('=') + 1).replace(/^'(.*)'$/, '$1');
      const envFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'sluice-env-')), '.env');
      writeFileSync(envFile, `${line}\nINGEST_TOKEN=change-me-ingest-token\n`);
      const r = run(['config', '--format', 'json'], envFile);
      assert.equal(r.code, 0, r.err);
      // `config` writes a $ as $$, as a compose file must; the container gets one.
      const services = JSON.parse(r.out.replaceAll('$$', '$')).services;
      assert.equal(services.postgres.environment.POSTGRES_PASSWORD, password);
      const asPgSees = (/** @type {string | undefined} */ url) => {
        // What pg connects with (its typings omit the field).
        const p = /** @type {any} */ (new pg.Client({ connectionString: url }))
          .connectionParameters;
        return [p.user, p.password, p.host, p.port, p.database];
      };
      const expected = ['sluice', password, 'postgres', 5432, 'sluice'];
      assert.deepEqual(asPgSees(migrationUrlFromEnv(services.migrate.environment)), expected);
      assert.deepEqual(asPgSees(loadConfig(services.service.environment).databaseUrl), expected);
    });
  }

  test('the images built from the repository are built, never pulled', () => {
    for (const name of ['migrate', 'service', 'feeder', 'producer']) {
      assert.ok(config.services[name].build, name);
      assert.equal(config.services[name].pull_policy, 'build', name);
    }
  });

  test('start-up waits on health, and resources follow the reference experiment', () => {
    const dep = (/** @type {string} */ s) => config.services[s].depends_on;
    assert.equal(dep('service').postgres.condition, 'service_healthy');
    assert.equal(dep('service').migrate.condition, 'service_completed_successfully');
    assert.equal(dep('feeder').service.condition, 'service_healthy');
    assert.equal(dep('feeder').elasticmq.condition, 'service_healthy');
    assert.equal(dep('k6').service.condition, 'service_healthy');
    assert.ok(config.services.postgres.healthcheck && config.services.elasticmq.healthcheck);
    const limits = (/** @type {string} */ s) => config.services[s].deploy.resources.limits;
    assert.deepEqual(
      [Number(limits('service').cpus), Number(limits('service').memory)],
      [1, 2 ** 30],
    );
    assert.deepEqual(
      [Number(limits('postgres').cpus), Number(limits('postgres').memory)],
      [2, 2 ** 30],
    );
  });

  for (const file of ['service/Dockerfile', 'lambda/Dockerfile']) {
    test(`${file}: multi-stage, production dependencies only, non-root, signals reach node`, () => {
      const text = read(file);
      assert.equal(text.match(/^FROM /gm)?.length, 2);
      assert.match(text, /npm ci --omit=dev/);
      assert.match(text, /^USER node$/m);
      assert.match(text, /^CMD \["node", /m, 'exec form: no shell between Docker and node');
    });
  }

  test('the service image checks /healthz; .dockerignore keeps node_modules and data out', () => {
    assert.match(read('service/Dockerfile'), /HEALTHCHECK[\s\S]*\/healthz/);
    const ignore = read('.dockerignore');
    for (const p of ['node_modules', '.data', '.env', '.git']) assert.ok(ignore.includes(p), p);
  });
});
