import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import { loadFeederConfig } from '../../src/config.js';
import { postBatch } from '../../src/service-client.js';

const START = 1_700_000_000_000;
const config = loadFeederConfig({
  SERVICE_URL: 'http://sluice.test',
  INGEST_TOKEN: 'tok-123',
  RETRY_BASE_MS: '200',
  RETRY_MAX_MS: '1000',
});
const USERS = [
  { email: 'a@x.io', name: 'A' },
  { email: 'b@x.io', name: 'B' },
];

/** @param {number} status @param {unknown} [body] @param {Record<string, string>} [headers] */
const answer =
  (status, body = {}, headers = {}) =>
  () =>
    new Response(typeof body === 'string' ? body : JSON.stringify(body), { status, headers });
const refused = (/** @type {string} */ code) => () =>
  Promise.reject(
    new TypeError('fetch failed', { cause: Object.assign(new Error(code), { code }) }),
  );
const stored = answer(201, { received: 2, inserted: 2, duplicates: 0 });
const unavailable = answer(503, { error: 'database_unavailable' }, { 'retry-after': '2' });

/**
 * A scripted service in place of fetch: the n-th call gets the n-th answer (the last one repeats).
 * Each call's time is kept, on the mocked clock.
 * @param {(() => Response | Promise<Response>)[]} script
 */
function scriptService(script) {
  /** @type {{ at: number, url: string, init: RequestInit }[]} */
  const calls = [];
  mock.method(
    globalThis,
    'fetch',
    async (/** @type {string} */ url, /** @type {RequestInit} */ init) => {
      calls.push({ at: Date.now(), url, init });
      return script[Math.min(calls.length, script.length) - 1]();
    },
  );
  return calls;
}

/**
 * Runs postBatch to the end on the mocked clock: whenever it waits on a timer, time jumps to it.
 * @param {{ deadline: number }} budget
 */
async function post(budget) {
  /** @type {boolean[]} */
  const attempts = [];
  const outcome = postBatch(config, USERS, {
    ...budget,
    onAttempt: (retry) => attempts.push(retry),
  });
  let done = false;
  outcome.finally(() => (done = true)).catch(() => {});
  while (!done) {
    await new Promise((resolve) => setImmediate(resolve));
    mock.timers.runAll();
  }
  return { outcome: await outcome, attempts, endedAt: Date.now() };
}

describe('postBatch (unit, scripted service, mocked clock)', () => {
  beforeEach(() => {
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: START });
    // Backoff draws half of each step: the waits are then exact.
    mock.method(Math, 'random', () => 0.5);
  });
  afterEach(() => {
    mock.timers.reset();
    mock.restoreAll();
  });

  test('one POST /users of the users as JSON, with the bearer token; 201 is stored', async () => {
    const calls = scriptService([stored]);
    const { outcome, attempts } = await post({ deadline: START + 10_000 });
    assert.deepEqual(outcome, {
      kind: 'stored',
      inserted: 2,
      updated: 0,
      stale: 0,
      quarantined: 0,
    });
    assert.deepEqual(attempts, [false]);
    assert.equal(calls[0].url, 'http://sluice.test/users');
    assert.equal(calls[0].init.method, 'POST');
    assert.deepEqual(calls[0].init.headers, {
      'content-type': 'application/json',
      prefer: 'resolution=ignore-duplicates',
      authorization: 'Bearer tok-123',
    });
    assert.deepEqual(JSON.parse(String(calls[0].init.body)), USERS);
  });

  test('200 (all already stored) is stored too; an unreadable body counts 0 inserted', async () => {
    scriptService([answer(200, 'not json')]);
    assert.deepEqual((await post({ deadline: START + 10_000 })).outcome, {
      kind: 'stored',
      inserted: 0,
      updated: 0,
      stale: 0,
      quarantined: 0,
    });
  });

  test('merge mode asks for it in Prefer, and counts what was updated', async () => {
    const calls = scriptService([
      answer(200, { received: 2, inserted: 0, updated: 2, duplicates: 2 }),
    ]);
    const outcome = postBatch(config, USERS, { deadline: START + 10_000, resolution: 'merge' });
    assert.deepEqual(await outcome, {
      kind: 'stored',
      inserted: 0,
      updated: 2,
      stale: 0,
      quarantined: 0,
    });
    assert.equal(
      /** @type {Record<string, string>} */ (calls[0].init.headers).prefer,
      'resolution=merge-duplicates',
    );
  });

  test('erasures go to POST /erasures as sent, with the token and key but no Prefer; its counts are read', async () => {
    const calls = scriptService([answer(200, { received: 2, erased: 1, absent: 1 })]);
    const erasures = [{ email: 'a@x.io' }, { email: 'b@x.io', changedAt: '2024-01-01T00:00:00Z' }];
    const outcome = await postBatch(config, erasures, {
      path: '/erasures',
      deadline: START + 10_000,
      resolution: 'merge',
      quarantine: true,
      idempotencyKey: 'sqs-erase',
    });
    assert.deepEqual(outcome, {
      kind: 'stored',
      inserted: 0,
      updated: 0,
      stale: 0,
      quarantined: 0,
      erased: 1,
      absent: 1,
    });
    assert.equal(calls[0].url, 'http://sluice.test/erasures');
    assert.deepEqual(calls[0].init.headers, {
      'content-type': 'application/json',
      authorization: 'Bearer tok-123',
      'idempotency-key': '"sqs-erase"',
    });
    assert.deepEqual(JSON.parse(String(calls[0].init.body)), erasures);
  });

  test('a 403 at /erasures (a client that may not erase) is refused at once, not retried', async () => {
    const calls = scriptService([
      answer(403, { error: 'forbidden', message: 'no right to erase' }),
    ]);
    const outcome = await postBatch(config, [{ email: 'a@x.io' }], {
      path: '/erasures',
      deadline: START + 10_000,
    });
    assert.deepEqual(outcome, { kind: 'refused', status: 403, reason: 'HTTP 403 forbidden' });
    assert.equal(calls.length, 1);
  });

  test("503, 429, a 500 that is not the service's own, a 502 and a refused connection are retried with exponential backoff until stored", async () => {
    const calls = scriptService([
      answer(503),
      answer(429),
      answer(500, 'Internal Server Error'),
      answer(502),
      refused('ECONNREFUSED'),
      stored,
    ]);
    const { outcome, attempts } = await post({ deadline: START + 60_000 });
    assert.deepEqual(outcome, {
      kind: 'stored',
      inserted: 2,
      updated: 0,
      stale: 0,
      quarantined: 0,
    });
    assert.deepEqual(attempts, [false, true, true, true, true, true]);
    // Half of 200, 400, 800, then the 1000 ms cap.
    assert.deepEqual(
      calls.slice(1).map((c, i) => c.at - calls[i].at),
      [100, 200, 400, 500, 500],
    );
  });

  test('never waits less than Retry-After, whatever the backoff would say', async () => {
    const calls = scriptService([
      answer(503, {}, { 'retry-after': '3' }),
      answer(429, {}, { 'retry-after': new Date(START + 3000 + 7000).toUTCString() }),
      stored,
    ]);
    await post({ deadline: START + 60_000 });
    assert.deepEqual(
      calls.slice(1).map((c, i) => c.at - calls[i].at),
      [3000, 7000],
    );
  });

  test('a 429 with Retry-After (the client over its rate) waits just that, however many came before, and does not grow the backoff', async () => {
    const throttled = answer(429, { error: 'rate_limited' }, { 'retry-after': '1' });
    const calls = scriptService([throttled, throttled, throttled, throttled, answer(503), stored]);
    const { outcome, attempts } = await post({ deadline: START + 60_000 });
    assert.deepEqual(outcome, {
      kind: 'stored',
      inserted: 2,
      updated: 0,
      stale: 0,
      quarantined: 0,
    });
    assert.deepEqual(attempts, [false, true, true, true, true, true]);
    // Four 1 s waits as told, then the 503's first backoff step (half of 200), not the fifth.
    assert.deepEqual(
      calls.slice(1).map((c, i) => c.at - calls[i].at),
      [1000, 1000, 1000, 1000, 100],
    );
  });

  test('no attempt and no wait runs past the deadline: the users come back unavailable, with the last reason', async () => {
    const calls = scriptService([answer(503)]);
    const deadline = START + 1_000;
    const { outcome, endedAt } = await post({ deadline });
    assert.deepEqual(outcome, { kind: 'unavailable', reason: 'HTTP 503' });
    // Waits of 100, 200 and 400 ms fit in the second; the next (500) would end past it.
    assert.deepEqual(
      calls.map((c) => c.at - START),
      [0, 100, 300, 700],
    );
    assert.equal(endedAt, START + 700, 'it gave up at once instead of sleeping into the deadline');
  });

  test('a Retry-After longer than the time left ends the retries at once', async () => {
    const calls = scriptService([unavailable]);
    const { outcome, endedAt } = await post({ deadline: START + 1_500 });
    assert.deepEqual(outcome, { kind: 'unavailable', reason: 'HTTP 503' });
    assert.equal(calls.length, 1);
    assert.equal(endedAt, START);
  });

  test('a deadline already past: nothing is sent', async () => {
    const calls = scriptService([stored]);
    const { outcome } = await post({ deadline: START });
    assert.deepEqual(outcome, { kind: 'unavailable', reason: 'no time left in the invocation' });
    assert.equal(calls.length, 0);
  });

  test('a network error is named by its code', async () => {
    scriptService([refused('ECONNRESET')]);
    assert.deepEqual((await post({ deadline: START + 50 })).outcome, {
      kind: 'unavailable',
      reason: 'ECONNRESET',
    });
  });

  test('400 invalid_batch names the refused users, with their fields and rules; nothing is retried', async () => {
    const errors = [
      { index: 1, field: 'email', message: 'x' },
      { index: 1, field: 'name', message: 'y' },
      { index: 0, field: 'phone', message: 'z' },
      { index: 'x', field: null, message: 'w' },
    ];
    const calls = scriptService([answer(400, { error: 'invalid_batch', message: 'no', errors })]);
    assert.deepEqual((await post({ deadline: START + 10_000 })).outcome, {
      kind: 'invalid',
      errors: errors.slice(0, 3),
    });
    assert.equal(calls.length, 1);
  });

  for (const [status, body, expected] of /** @type {[number, unknown, object][]} */ ([
    [413, { error: 'payload_too_large' }, { kind: 'tooLarge' }],
    [
      401,
      { error: 'unauthorized' },
      { kind: 'refused', status: 401, reason: 'HTTP 401 unauthorized' },
    ],
    [
      415,
      { error: 'unsupported_media_type' },
      { kind: 'refused', status: 415, reason: 'HTTP 415 unsupported_media_type' },
    ],
    [
      400,
      { error: 'malformed_json' },
      { kind: 'refused', status: 400, reason: 'HTTP 400 malformed_json' },
    ],
    [
      500,
      { error: 'internal', message: 'unexpected error', errorId: 'id-42' },
      { kind: 'refused', status: 500, reason: 'HTTP 500 internal, error id id-42' },
    ],
  ])) {
    test(`${status} ${JSON.stringify(body)} is final: ${JSON.stringify(expected)}, not retried`, async () => {
      const calls = scriptService([answer(status, body), stored]);
      assert.deepEqual((await post({ deadline: START + 10_000 })).outcome, expected);
      assert.equal(calls.length, 1);
    });
  }
});

describe('postBatch with an Idempotency-Key (unit, scripted service, mocked clock)', () => {
  beforeEach(() => {
    mock.timers.enable({ apis: ['setTimeout', 'Date'], now: START });
    mock.method(Math, 'random', () => 0.5);
  });
  afterEach(() => {
    mock.timers.reset();
    mock.restoreAll();
  });
  const replayedAnswer = answer(
    201,
    { received: 2, inserted: 2, duplicates: 0 },
    { 'idempotent-replayed': 'true' },
  );
  /** @param {{ deadline: number }} budget */
  const keyedPost = async (budget) => {
    const outcome = postBatch(config, USERS, { ...budget, idempotencyKey: 'sqs-abc' });
    let done = false;
    outcome.finally(() => (done = true)).catch(() => {});
    while (!done) {
      await new Promise((resolve) => setImmediate(resolve));
      mock.timers.runAll();
    }
    return outcome;
  };

  test('every attempt sends the same key, as a Structured Field string; 409 (the key in flight) is retried', async () => {
    const calls = scriptService([
      answer(409, { error: 'idempotency_key_in_flight' }, { 'retry-after': '1' }),
      answer(503),
      stored,
    ]);
    assert.deepEqual(await keyedPost({ deadline: START + 60_000 }), {
      kind: 'stored',
      inserted: 2,
      updated: 0,
      stale: 0,
      quarantined: 0,
    });
    assert.deepEqual(
      calls.map((c) => /** @type {Record<string, string>} */ (c.init.headers)['idempotency-key']),
      ['"sqs-abc"', '"sqs-abc"', '"sqs-abc"'],
    );
    assert.equal(calls[1].at - calls[0].at, 1000, 'after Retry-After');
  });

  test("a replay on the first attempt is an earlier delivery's write: replayed", async () => {
    scriptService([replayedAnswer]);
    assert.deepEqual(await keyedPost({ deadline: START + 60_000 }), {
      kind: 'stored',
      inserted: 2,
      updated: 0,
      stale: 0,
      quarantined: 0,
      replayed: true,
    });
  });

  test("a replay after an attempt of ours was lost (no answer, outcome_unknown, a proxy's 502) is that attempt's answer: not replayed", async () => {
    for (const lost of [
      refused('ECONNRESET'),
      answer(503, { error: 'outcome_unknown' }),
      answer(502),
    ]) {
      scriptService([lost, replayedAnswer]);
      assert.deepEqual(await keyedPost({ deadline: START + 60_000 }), {
        kind: 'stored',
        inserted: 2,
        updated: 0,
        stale: 0,
        quarantined: 0,
      });
      mock.restoreAll();
      mock.method(Math, 'random', () => 0.5);
    }
  });

  test('a replay after refusals that wrote nothing (database_unavailable, lock_timeout, 409) is still replayed', async () => {
    scriptService([
      unavailable,
      answer(503, { error: 'lock_timeout' }),
      answer(409, { error: 'idempotency_key_in_flight' }),
      replayedAnswer,
    ]);
    assert.deepEqual(await keyedPost({ deadline: START + 60_000 }), {
      kind: 'stored',
      inserted: 2,
      updated: 0,
      stale: 0,
      quarantined: 0,
      replayed: true,
    });
  });
});
