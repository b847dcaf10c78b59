import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadFeederConfig } from '../../src/config.js';
import { ServiceUnavailableError } from '../../src/errors.js';
import { createFeeder } from '../../src/feeder.js';
import { lambdaContext, makeEvent } from '../support/sqs-events.js';

const config = loadFeederConfig({
  SERVICE_URL: 'http://sluice.test',
  INGEST_TOKEN_SECRET_ARN: 'arn:aws:secretsmanager:us-east-1:000000000000:secret:feeder',
  POST_CHUNK_ITEMS: '2',
});
const user = (/** @type {string} */ tag) => ({ email: `${tag}@example.com`, name: tag });

/**
 * The parts a feeder is built from, each recording what it is asked: a logger and metrics shaped
 * as Powertools', a token reader, a poster in place of the service, tracing that counts its spans.
 * @param {(token: string | undefined) => import('../../src/service-client.js').PostOutcome} answer
 */
function parts(answer) {
  /** @type {{ level: string, message: string, fields?: any }[]} */ const logs = [];
  /** @type {string[]} */ const metrics = [];
  /** @type {{ token: string | undefined, users: unknown[], traceparent: string | undefined }[]} */ const posts =
    [];
  const spans = { started: 0, ended: 0 };
  let reads = 0;
  const at =
    (/** @type {string} */ level) => (/** @type {string} */ message, /** @type {any} */ fields) =>
      void logs.push({ level, message, fields });
  return {
    logs,
    metrics,
    posts,
    spans,
    reads: () => reads,
    /** @type {import('../../src/feeder.js').FeederParts} */
    parts: {
      config,
      readToken: async (loaded) => ({ ...loaded, ingestToken: `token-${++reads}` }),
      logger: /** @type {any} */ ({
        info: at('INFO'),
        warn: at('WARN'),
        error: at('ERROR'),
        setCorrelationId: () => {},
      }),
      metrics: /** @type {any} */ ({
        addMetric: (/** @type {string} */ name) => void metrics.push(name),
        publishStoredMetrics: () => void metrics.push('published'),
      }),
      tracing: {
        startInvocationSpan: () => /** @type {any} */ (++spans.started, {}),
        runInSpan: (_span, fn) => fn(),
        endInvocationSpan: () => void spans.ended++,
        currentTraceparent: () => '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      },
      postBatch: async (used, users, options) => {
        posts.push({ token: used.ingestToken, users, traceparent: options.traceparent?.() });
        options.onAttempt?.(false);
        return answer(used.ingestToken);
      },
    },
  };
}

describe('createFeeder (unit, built from its parts)', () => {
  test('reads the token at the first invocation, not when built, and uses the logger, metrics, tracing and poster it was handed', async () => {
    const feeder = parts(() => ({ kind: 'stored', inserted: 2, updated: 0, quarantined: 0 }));
    const handler = createFeeder(feeder.parts);
    assert.equal(feeder.reads(), 0, 'nothing read when built');
    assert.deepEqual(
      await handler(makeEvent([[user('a'), user('b')], user('c')]), lambdaContext(10_000)),
      { batchItemFailures: [] },
    );
    assert.deepEqual(await handler(makeEvent([user('d')]), lambdaContext(10_000)), {
      batchItemFailures: [],
    });
    assert.equal(feeder.reads(), 1, 'read once, kept for the next invocation');
    assert.deepEqual(
      feeder.posts.map((p) => [p.token, p.users.length]),
      [
        ['token-1', 2],
        ['token-1', 1],
        ['token-1', 1],
      ],
    );
    assert.ok(
      feeder.posts.every((p) => p.traceparent?.startsWith('00-0af7651916cd43dd')),
      "each post carries the tracing's traceparent",
    );
    assert.deepEqual(feeder.spans, { started: 2, ended: 2 });
    assert.deepEqual(
      feeder.logs.map((l) => [l.level, l.message, l.fields.usersStored]),
      [
        ['INFO', 'sqs batch fed', 3],
        ['INFO', 'sqs batch fed', 1],
      ],
    );
    assert.equal(
      feeder.metrics.filter((m) => m === 'published').length,
      2,
      'one EMF record per invocation',
    );
  });

  test('what a feeder keeps is its own: two feeders each read their token and say refused credentials once', async () => {
    const refusing = () =>
      parts(() => ({ kind: 'refused', status: 403, reason: 'HTTP 403 forbidden' }));
    const [one, two] = [refusing(), refusing()];
    for (const feeder of [one, two]) {
      const handler = createFeeder(feeder.parts);
      for (let i = 0; i < 2; i++)
        await assert.rejects(
          handler(makeEvent([user(`r${i}`)]), lambdaContext(10_000)),
          ServiceUnavailableError,
        );
      assert.equal(feeder.reads(), 1);
      assert.deepEqual(
        feeder.logs.filter((l) => l.level === 'ERROR').map((l) => l.fields),
        [{ status: 403, tokenSent: true }],
        'said once per feeder',
      );
    }
  });

  test('a 401: the token is read again through the reader it was handed, once, and the chunk posted again', async () => {
    const feeder = parts((token) =>
      token === 'token-2'
        ? { kind: 'stored', inserted: 1, updated: 0, quarantined: 0 }
        : { kind: 'refused', status: 401, reason: 'HTTP 401 unauthorized' },
    );
    const handler = createFeeder(feeder.parts);
    assert.deepEqual(
      await handler(makeEvent([user('a'), user('b'), user('c')]), lambdaContext(10_000)),
      { batchItemFailures: [] },
    );
    assert.equal(feeder.reads(), 2, 'the cold start and one read again for the two chunks refused');
    assert.deepEqual(
      feeder.posts.map((p) => p.token),
      ['token-1', 'token-1', 'token-2', 'token-2'],
    );
  });
});
