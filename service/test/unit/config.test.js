import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

describe('configuration (unit)', () => {
  test('defaults follow the contract and docs/configuration.md', () => {
    const c = loadConfig({});
    assert.equal(c.port, 3000);
    assert.equal(c.host, '127.0.0.1');
    assert.equal(c.maxBatchItems, 10_000);
    assert.equal(c.maxBodyBytes, 10 * 1024 * 1024);
    assert.equal(c.bodyReadTimeoutMs, 30_000);
    assert.equal(c.insertChunkRows, 1000);
    assert.equal(c.insertStrategy, 'format');
    assert.equal(c.groupCommit, true);
    assert.equal(c.groupCommitMaxRows, 1000);
    assert.equal(c.groupCommitSmallRows, 100);
    assert.equal(c.workers, 0);
    assert.equal(c.databaseUrl, undefined);
    assert.equal(c.auth.ingestToken, undefined);
    assert.equal(c.dbPoolMax, 10);
    assert.equal(c.dbConnectTimeoutMs, 2000);
    assert.equal(c.dbStatementTimeoutMs, 30_000);
    assert.equal(c.dbLockTimeoutMs, 3000);
    assert.equal(c.shutdownTimeoutMs, 25_000);
    assert.equal(c.logLevel, 'info');
    assert.equal(c.admissionBudgetBytes, 3 * 1024 * 1024);
    assert.equal(c.admissionWaitMs, 2000);
  });

  test('values are read as given, around spaces; an empty one means the default', () => {
    const c = loadConfig({
      PORT: ' 0 ',
      HOST: ' 127.0.0.1 ',
      INSERT_CHUNK_ROWS: '1',
      INSERT_STRATEGY: ' copy ',
      LOG_LEVEL: 'silent',
      MAX_BATCH_ITEMS: '1000000',
      ADMISSION_WAIT_MS: '0',
      DB_POOL_MAX: '',
      INGEST_TOKEN: 's3cret',
      DATABASE_URL: 'postgresql://u:p@db:5432/sluice',
    });
    assert.deepEqual(
      [
        c.port,
        c.host,
        c.insertChunkRows,
        c.insertStrategy,
        c.logLevel,
        c.maxBatchItems,
        c.admissionWaitMs,
        c.dbPoolMax,
        c.auth.ingestToken,
        c.databaseUrl,
      ],
      [
        0,
        '127.0.0.1',
        1,
        'copy',
        'silent',
        1_000_000,
        0,
        10,
        's3cret',
        'postgresql://u:p@db:5432/sluice',
      ],
    );
    assert.equal(
      loadConfig({ INGEST_TOKEN: '' }).auth.ingestToken,
      undefined,
      'an empty token is no token: requests are not authenticated',
    );
    // No token: loopback, so an open write endpoint is never exposed by default; a token: every address.
    assert.equal(loadConfig({ HOST: '   ' }).host, '127.0.0.1');
    assert.equal(loadConfig({ HOST: '', INGEST_TOKEN: 't' }).host, '0.0.0.0');
    assert.equal(loadConfig({ HOST: '0.0.0.0' }).host, '0.0.0.0');
  });

  for (const [value, expected] of /** @type {[string, boolean][]} */ ([
    ['on', true],
    ['TRUE', true],
    ['1', true],
    ['off', false],
    [' False ', false],
    ['0', false],
  ])) {
    test(`GROUP_COMMIT=${JSON.stringify(value)} is ${expected ? 'on' : 'off'}`, () => {
      assert.equal(loadConfig({ GROUP_COMMIT: value }).groupCommit, expected);
    });
  }

  test('the smallest and largest values of a range are taken; one past either end is refused', () => {
    for (const [variable, min, max] of /** @type {[string, number, number][]} */ ([
      ['PORT', 0, 65535],
      ['INSERT_CHUNK_ROWS', 1, 100_000],
      ['MAX_BODY_BYTES', 2, 1024 * 1024 * 1024],
      ['ADMISSION_BUDGET_BYTES', 64 * 1024, 1024 * 1024 * 1024],
      ['WORKERS', 0, 256],
      ['GROUP_COMMIT_SMALL_ROWS', 1, 100_000],
    ])) {
      assert.doesNotThrow(() => loadConfig({ [variable]: String(min) }), `${variable}=${min}`);
      assert.doesNotThrow(() => loadConfig({ [variable]: String(max) }), `${variable}=${max}`);
      if (min > 0)
        assert.throws(
          () => loadConfig({ [variable]: String(min - 1) }),
          (err) => err instanceof ConfigError && err.message.startsWith(variable),
          `${variable}=${min - 1}`,
        );
      assert.throws(
        () => loadConfig({ [variable]: String(max + 1) }),
        (err) => err instanceof ConfigError && err.message.startsWith(variable),
        `${variable}=${max + 1}`,
      );
    }
  });

  test('WORKERS=auto means one per core', () => {
    assert.ok(loadConfig({ WORKERS: 'auto' }).workers >= 1);
  });

  test('without DATABASE_URL, the PG* variables that ECS injects from the RDS secret name the database', () => {
    const c = loadConfig({
      PGHOST: 'db.internal',
      PGUSER: 'sluice',
      PGPASSWORD: 's3cr@t',
      PGDATABASE: 'sluice',
      PGSSLMODE: 'verify-full',
    });
    assert.equal(
      c.databaseUrl,
      'postgresql://sluice:s3cr%40t@db.internal:5432/sluice?sslmode=verify-full',
    );
    assert.throws(
      () => loadConfig({ PGHOST: 'db.internal', PGUSER: 'sluice' }),
      (err) => err instanceof ConfigError && err.message.startsWith('PGPASSWORD'),
    );
  });

  for (const [variable, value] of [
    ['PORT', 'eighty'],
    ['PORT', '70000'],
    ['MAX_BATCH_ITEMS', '0'],
    ['MAX_BODY_BYTES', '-5'],
    ['INSERT_CHUNK_ROWS', '1.5'],
    ['INSERT_STRATEGY', 'magic'],
    ['WORKERS', 'many'],
    ['DB_POOL_MAX', ''.padEnd(3, 'x')],
    ['DATABASE_URL', 'mysql://x'],
    ['LOG_LEVEL', 'loud'],
    ['LOG_LEVEL', 'INFO'],
    ['GROUP_COMMIT', 'maybe'],
    ['GROUP_COMMIT_MAX_ROWS', '0'],
    ['BODY_READ_TIMEOUT_MS', '0'],
    ['SHUTDOWN_TIMEOUT_MS', 'soon'],
    ['DB_STATEMENT_TIMEOUT_MS', '3600001'],
    ['DB_CONNECT_TIMEOUT_MS', '0'],
    ['DB_LOCK_TIMEOUT_MS', '0'],
    ['ADMISSION_BUDGET_BYTES', '1000'],
    ['ADMISSION_BUDGET_BYTES', '8MB'],
    ['ADMISSION_WAIT_MS', '-1'],
  ]) {
    test(`a bad ${variable} (${value}) stops start-up with a message naming it`, () => {
      assert.throws(
        () => loadConfig({ [variable]: value }),
        (err) => err instanceof ConfigError && err.message.startsWith(variable),
      );
    });
  }
  test('JWT_ERASE_ROLES: none by default; a list of roles that grant writing, else start-up stops naming it', () => {
    const secret = { JWT_SECRET: 's'.repeat(32) };
    assert.deepEqual(loadConfig(secret).auth.jwt?.eraseRoles, []);
    assert.deepEqual(
      loadConfig({ ...secret, JWT_ERASE_ROLES: ' ops , service_role' }).auth.jwt?.eraseRoles,
      ['ops', 'service_role'],
    );
    assert.deepEqual(
      loadConfig({ ...secret, JWT_ROLES: 'writer,ops', JWT_ERASE_ROLES: 'ops' }).auth.jwt
        ?.eraseRoles,
      ['ops'],
    );
    for (const [env, problem] of /** @type {[Record<string, string>, RegExp][]} */ ([
      [{ JWT_ERASE_ROLES: 'ops' }, /^JWT_ERASE_ROLES is set, but neither JWT_SECRET nor/],
      [{ ...secret, JWT_ERASE_ROLES: 'ops,,x' }, /^JWT_ERASE_ROLES must be a comma-separated/],
      [
        { ...secret, JWT_ROLES: 'writer', JWT_ERASE_ROLES: 'writer,ops,dpo' },
        /^JWT_ERASE_ROLES names "ops", "dpo", which JWT_ROLES does not name: its tokens/,
      ],
      [
        { ...secret, JWT_ERASE_ROLES: 'ops,anon' },
        /^JWT_ERASE_ROLES names "anon", which never grants writing: its tokens/,
      ],
    ])) {
      assert.throws(
        () => loadConfig(env),
        (err) => err instanceof ConfigError && problem.test(err.message),
        JSON.stringify(env),
      );
    }
  });

  test("tracing's OTEL_ variables are read with the rest, once: off by default, the SDK's settings from them", () => {
    const off = loadConfig({});
    assert.equal(off.tracing.enabled, false);
    assert.equal(off.tracing.sampler, 'parentbased_always_on');
    assert.equal(off.tracing.samplerRatio, 1);
    const on = loadConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: ' 0.25 ',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
    });
    assert.equal(on.tracing.enabled, true);
    assert.equal(on.tracing.tracesUrl, 'http://collector:4318/v1/traces');
    assert.equal(on.tracing.samplerRatio, 0.25);
    assert.equal(on.tracing.protocol, 'http/json');
    assert.equal(on.tracing.batch.scheduledDelayMillis, 100);
    assert.equal(
      loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/traces' }).tracing.tracesUrl,
      'http://c:4318/traces',
    );
    assert.equal(
      loadConfig({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_SDK_DISABLED: 'true' }).tracing.enabled,
      false,
    );
    assert.equal(loadConfig({ OTEL_TRACES_SAMPLER_ARG: '0' }).tracing.samplerRatio, 0);
    assert.equal(loadConfig({ OTEL_TRACES_SAMPLER_ARG: '1' }).tracing.samplerRatio, 1);
  });

  test('a sampler argument that is no ratio from 0 to 1 is refused at start, naming OTEL_TRACES_SAMPLER_ARG (it was used as 1)', () => {
    for (const arg of ['2', '1.01', '-0.5', 'half', '1e-2', '0x1']) {
      assert.throws(
        () => loadConfig({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: arg }),
        (err) => err instanceof ConfigError && /^OTEL_TRACES_SAMPLER_ARG must be/.test(err.message),
        arg,
      );
    }
  });
});
