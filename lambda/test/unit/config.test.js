import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadFeederConfig } from '../../src/config.js';
import { loadRunnerConfig, loadSqsConfig } from '../../local/sqs-config.js';
import { ConfigError } from '../../src/errors.js';

// Every case passes its own environment: nothing here reads or changes process.env.
const SERVICE = { SERVICE_URL: 'http://127.0.0.1:3000' };
const QUEUE = { QUEUE_URL: 'http://127.0.0.1:9324/000000000000/sluice-users' };

/** @param {string} variable @returns {(err: unknown) => boolean} */
const naming = (variable) => (err) =>
  err instanceof ConfigError && err.variable === variable && err.message.startsWith(`${variable} `);

describe("the handler's configuration (unit)", () => {
  test('defaults, as docs/feeder.md lists them', () => {
    assert.deepEqual(loadFeederConfig(SERVICE), {
      serviceUrl: 'http://127.0.0.1:3000',
      ingestToken: undefined,
      ingestTokenSecretArn: undefined,
      ingestClientName: 'feeder',
      postChunkItems: 1000,
      postConcurrency: 4,
      requestTimeoutMs: 30_000,
      retryBaseMs: 200,
      retryMaxMs: 5_000,
      safetyMarginMs: 3_000,
      conflictResolution: 'ignore',
      invalidUsers: 'quarantine',
    });
  });

  test('INVALID_USERS is quarantine or refuse, and nothing else', () => {
    assert.equal(loadFeederConfig({ ...SERVICE, INVALID_USERS: 'refuse' }).invalidUsers, 'refuse');
    assert.throws(
      () => loadFeederConfig({ ...SERVICE, INVALID_USERS: 'skip' }),
      /^ConfigError: INVALID_USERS must be one of quarantine, refuse/,
    );
  });

  test('CONFLICT_RESOLUTION is ignore or merge, and nothing else', () => {
    assert.equal(
      loadFeederConfig({ ...SERVICE, CONFLICT_RESOLUTION: 'merge' }).conflictResolution,
      'merge',
    );
    assert.throws(
      () => loadFeederConfig({ ...SERVICE, CONFLICT_RESOLUTION: 'overwrite' }),
      /^ConfigError: CONFLICT_RESOLUTION must be one of ignore, merge/,
    );
  });

  test('values are read, trimmed, and SERVICE_URL loses its trailing slashes', () => {
    const config = loadFeederConfig({
      SERVICE_URL: ' https://alb.internal/// ',
      INGEST_TOKEN: 'tok',
      POST_CHUNK_ITEMS: ' 250 ',
      POST_CONCURRENCY: '8',
      REQUEST_TIMEOUT_MS: '100',
      RETRY_BASE_MS: '1',
      RETRY_MAX_MS: '300000',
      SAFETY_MARGIN_MS: '0',
    });
    assert.equal(config.serviceUrl, 'https://alb.internal');
    assert.equal(config.ingestToken, 'tok');
    assert.deepEqual(
      [
        config.postChunkItems,
        config.postConcurrency,
        config.requestTimeoutMs,
        config.retryBaseMs,
        config.retryMaxMs,
        config.safetyMarginMs,
      ],
      [250, 8, 100, 1, 300_000, 0],
    );
  });

  test('an empty variable means its default', () => {
    assert.equal(
      loadFeederConfig({ ...SERVICE, POST_CHUNK_ITEMS: '', INGEST_TOKEN: '' }).postChunkItems,
      1000,
    );
    assert.equal(loadFeederConfig({ ...SERVICE, INGEST_TOKEN: '' }).ingestToken, undefined);
  });

  for (const [variable, value] of [
    ['SERVICE_URL', undefined],
    ['SERVICE_URL', '   '],
    ['SERVICE_URL', 'ftp://host'],
    ['SERVICE_URL', 'not a url'],
    ['POST_CHUNK_ITEMS', '0'],
    ['POST_CHUNK_ITEMS', '10001'],
    ['POST_CHUNK_ITEMS', '1.5'],
    ['POST_CHUNK_ITEMS', '-3'],
    ['POST_CONCURRENCY', '65'],
    ['REQUEST_TIMEOUT_MS', '99'],
    ['RETRY_BASE_MS', 'fast'],
    ['RETRY_MAX_MS', '300001'],
    ['SAFETY_MARGIN_MS', '1e3'],
  ]) {
    test(`${variable}=${JSON.stringify(value)} stops the cold start with the variable named`, () => {
      assert.throws(() => loadFeederConfig({ ...SERVICE, [variable]: value }), naming(variable));
    });
  }
});

describe("the local runner's and the producer's configuration (unit)", () => {
  test('with an endpoint (ElasticMQ) and no credentials, local stand-ins are used', () => {
    assert.deepEqual(loadSqsConfig({ ...QUEUE, SQS_ENDPOINT: 'http://127.0.0.1:9324' }), {
      endpoint: 'http://127.0.0.1:9324',
      queueUrl: QUEUE.QUEUE_URL,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
  });

  test('on AWS: no endpoint, the SDK finds the credentials, the region comes from AWS_REGION or AWS_DEFAULT_REGION', () => {
    assert.deepEqual(
      loadSqsConfig({ ...QUEUE, AWS_REGION: 'eu-west-1', AWS_DEFAULT_REGION: 'us-west-2' }),
      {
        endpoint: undefined,
        queueUrl: QUEUE.QUEUE_URL,
        region: 'eu-west-1',
        credentials: undefined,
      },
    );
    assert.equal(loadSqsConfig({ ...QUEUE, AWS_DEFAULT_REGION: 'us-west-2' }).region, 'us-west-2');
    assert.equal(
      loadSqsConfig({ ...QUEUE, SQS_ENDPOINT: 'http://127.0.0.1:9324', AWS_ACCESS_KEY_ID: 'AKIA' })
        .credentials,
      undefined,
      'given credentials are left to the SDK',
    );
  });

  test('QUEUE_URL is required and SQS_ENDPOINT must be a URL', () => {
    assert.throws(() => loadSqsConfig({}), naming('QUEUE_URL'));
    assert.throws(
      () => loadSqsConfig({ ...QUEUE, SQS_ENDPOINT: 'localhost:9324' }),
      naming('SQS_ENDPOINT'),
    );
  });

  test("the runner's defaults are Lambda's and the SAM template's", () => {
    const { batchSize, batchWindowMs, receivers, concurrency, functionTimeoutMs } =
      loadRunnerConfig(QUEUE);
    assert.deepEqual(
      { batchSize, batchWindowMs, receivers, concurrency, functionTimeoutMs },
      {
        batchSize: 1000,
        batchWindowMs: 1000,
        receivers: 4,
        concurrency: 2,
        functionTimeoutMs: 60_000,
      },
    );
    assert.equal(
      loadRunnerConfig({ ...QUEUE, BATCH_WINDOW_MS: '0' }).batchWindowMs,
      0,
      'no window: a batch goes as soon as it is received',
    );
  });

  for (const [variable, value] of [
    ['BATCH_SIZE', '10001'],
    ['BATCH_WINDOW_MS', '300001'],
    ['RECEIVERS', '0'],
    ['RUNNER_CONCURRENCY', 'two'],
    ['FUNCTION_TIMEOUT_MS', '999'],
  ]) {
    test(`${variable}=${value} is refused with its name`, () => {
      assert.throws(() => loadRunnerConfig({ ...QUEUE, [variable]: value }), naming(variable));
    });
  }
});
