import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import { feederFromEnvironment } from '../../src/handler.js';
import { setEnv } from '../../../test/support/env.js';
import { captureHandlerOutput } from '../support/handler-output.js';
import { lambdaContext, makeEvent, makeRecord } from '../support/sqs-events.js';

// Its own file: the mocked clock would also run the timers of the HTTP client's sockets that
// another test left open. Fetch is answered from a script, so no socket is opened here.
const user = (/** @type {string} */ tag) => ({ email: `${tag}@example.com`, name: tag });
/** @param {any[]} users */
const stored = (users) =>
  /** @type {[number, unknown]} */ ([
    201,
    { received: users.length, inserted: users.length, duplicates: 0 },
  ]);
const failures = (/** @type {any} */ result) =>
  result.batchItemFailures.map((/** @type {any} */ f) => f.itemIdentifier).sort();

describe('handler (unit, mocked clock): retries and the time budget', () => {
  /** @type {ReturnType<typeof captureHandlerOutput>} */ let output;
  /** @type {() => void} */ let restoreEnv = () => {};
  const START = 1_700_000_000_000;
  beforeEach(() => {
    output = captureHandlerOutput();
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: START });
    // Backoff draws half of each step: whole milliseconds, as the real clock's.
    mock.method(Math, 'random', () => 0.5);
  });
  afterEach(() => {
    mock.timers.reset();
    mock.restoreAll();
    output.restore();
    restoreEnv();
  });

  /**
   * A handler whose posts reach `respond` through a mocked fetch, each one's time kept.
   * @param {(users: any[], n: number) => [number, unknown, Record<string, string>?]} respond @param {Record<string, string>} [env]
   */
  function withScriptedFetch(respond, env = {}) {
    /** @type {number[]} */ const postedAt = [];
    mock.method(
      globalThis,
      'fetch',
      async (/** @type {string} */ _url, /** @type {RequestInit} */ init) => {
        postedAt.push(Date.now());
        const [status, body, headers = {}] = respond(
          JSON.parse(String(init.body)),
          postedAt.length,
        );
        return new Response(JSON.stringify(body), {
          status,
          headers: { 'content-type': 'application/json', ...headers },
        });
      },
    );
    restoreEnv = setEnv({
      SERVICE_URL: 'http://sluice.test',
      RETRY_BASE_MS: '20',
      RETRY_MAX_MS: '200',
      SAFETY_MARGIN_MS: '100',
      ...env,
    });
    return { postedAt, run: feederFromEnvironment(process.env) };
  }

  /** Runs an invocation to its end: whenever it waits on a timer (a backoff), time jumps to it. @template T @param {Promise<T>} invocation */
  async function toTheEnd(invocation) {
    let done = false;
    invocation.finally(() => (done = true)).catch(() => {});
    while (!done) {
      await new Promise((resolve) => setImmediate(resolve));
      mock.timers.runAll();
    }
    return invocation;
  }

  test('503 then success: retried with backoff, honouring Retry-After, and nothing fails', async () => {
    // Retry-After on the first refusal only: the second retry waits the (short) backoff.
    const { postedAt, run } = withScriptedFetch((users, n) =>
      n === 1
        ? [503, { error: 'database_unavailable' }, { 'retry-after': '1' }]
        : n === 2
          ? [503, { error: 'database_unavailable' }]
          : stored(users),
    );
    const result = await toTheEnd(run(makeEvent([user('r1')]), lambdaContext(20_000)));
    assert.deepEqual(result, { batchItemFailures: [] });
    assert.equal(postedAt.length, 3);
    assert.ok(
      postedAt[1] - postedAt[0] >= 1_000,
      `waited for Retry-After: ${postedAt[1] - postedAt[0]} ms`,
    );
    assert.equal(postedAt[2] - postedAt[1], 20, 'then the backoff: half of RETRY_BASE_MS × 2');
    const line = output.logs.at(-1) ?? {};
    assert.equal(line.retries, 2);
    assert.equal(line.posts, 3);
  });

  test('the time budget is respected: no retry starts past the deadline, the messages fail', async () => {
    const { postedAt, run } = withScriptedFetch(() => [503, { error: 'database_unavailable' }], {
      SAFETY_MARGIN_MS: '400',
    });
    const good = makeRecord(user('late'));
    const poison = makeRecord('nope');
    const result = await toTheEnd(run({ Records: [good, poison] }, lambdaContext(1_000)));
    const deadline = START + 1_000 - 400;
    assert.ok(postedAt.length > 2, `retried: ${postedAt.length} posts`);
    assert.ok(
      postedAt.every((at) => at < deadline),
      `no post at or past the deadline: ${postedAt.map((at) => at - START)}`,
    );
    assert.ok(Date.now() <= deadline, `returned by the deadline: ${Date.now() - START} ms`);
    assert.deepEqual(failures(result), [good.messageId, poison.messageId].sort());
  });
});
