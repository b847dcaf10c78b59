import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { ServiceUnavailableError } from '../../src/errors.js';
import { feederFromEnvironment } from '../../src/handler.js';
import { setEnv } from '../../../test/support/env.js';
import { captureHandlerOutput } from '../support/handler-output.js';
import { startSecretsManagerStub } from '../support/secrets-manager-stub.js';
import { lambdaContext, makeEvent, makeRecord } from '../support/sqs-events.js';
import { startStubService } from '../support/stub-service.js';

const user = (/** @type {string} */ tag) => ({ email: `${tag}@example.com`, name: tag });
/** @param {any[]} users */
const stored = (users) =>
  /** @type {[number, unknown]} */ ([
    201,
    { received: users.length, inserted: users.length, duplicates: 0 },
  ]);
const failures = (/** @type {any} */ result) =>
  result.batchItemFailures.map((/** @type {any} */ f) => f.itemIdentifier).sort();

describe('handler (unit, scripted service)', () => {
  /** @type {Awaited<ReturnType<typeof startStubService>> | undefined} */ let stub;
  /** @type {ReturnType<typeof captureHandlerOutput>} */ let output;
  /** @type {() => void} */ let restoreEnv = () => {};
  beforeEach(() => {
    output = captureHandlerOutput();
  });
  afterEach(async () => {
    output.restore();
    restoreEnv();
    await stub?.close();
    stub = undefined;
  });

  /** @param {Parameters<typeof startStubService>[0]} respond @param {Record<string, string>} [env] */
  async function withService(respond, env = {}) {
    stub = await startStubService(respond);
    restoreEnv = setEnv({
      SERVICE_URL: stub.url,
      POST_CHUNK_ITEMS: '1000',
      POST_CONCURRENCY: '4',
      RETRY_BASE_MS: '20',
      RETRY_MAX_MS: '200',
      SAFETY_MARGIN_MS: '100',
      ...env,
    });
    // A feeder of the test's own, as a cold start makes it from the environment (the AWS SDK reads
    // its endpoint and credentials there too).
    return feederFromEnvironment(process.env);
  }

  test('single users and arrays from many messages go out in chunks; nothing fails', async () => {
    const run = await withService(stored, { POST_CHUNK_ITEMS: '3' });
    const event = makeEvent([
      user('a'),
      [user('b'), user('c')],
      [user('d'), user('e'), user('f'), user('g')],
    ]);
    const result = await run(event, lambdaContext(10_000));
    assert.deepEqual(result, { batchItemFailures: [] });
    const posted = /** @type {NonNullable<typeof stub>} */ (stub).requests;
    assert.deepEqual(
      posted.map((r) => r.length),
      [3, 3, 1],
    );
    assert.deepEqual(
      posted
        .flat()
        .map((u) => u.name)
        .sort(),
      ['a', 'b', 'c', 'd', 'e', 'f', 'g'],
    );
  });

  test('bad JSON and non-user bodies fail alone; the good messages are stored', async () => {
    const run = await withService(stored);
    const good = makeRecord([user('g1'), user('g2')]);
    const badJson = makeRecord('{"email": ');
    const notUsers = makeRecord([1, 2]);
    const empty = makeRecord([]);
    const result = await run({ Records: [good, badJson, notUsers, empty] }, lambdaContext(10_000));
    assert.deepEqual(
      failures(result),
      [badJson.messageId, notUsers.messageId, empty.messageId].sort(),
    );
    assert.deepEqual(
      /** @type {any} */ (stub).requests.flat().map((/** @type {any} */ u) => u.name),
      ['g1', 'g2'],
    );
  });

  test('a 400 naming indexes fails exactly those messages, and the rest is posted again', async () => {
    const run = await withService((users) => {
      const bad = users
        .map((u, index) =>
          u.email.startsWith('bad') ? { index, field: 'email', message: 'x' } : null,
        )
        .filter(Boolean);
      return bad.length
        ? [400, { error: 'invalid_batch', message: 'no', errors: bad }]
        : stored(users);
    });
    const ok1 = makeRecord([user('ok1'), user('ok2')]);
    const poisoned = makeRecord([user('fine'), { email: 'bad-one', name: 'B' }]);
    const ok2 = makeRecord(user('ok3'));
    const result = await run({ Records: [ok1, poisoned, ok2] }, lambdaContext(10_000));
    assert.deepEqual(failures(result), [poisoned.messageId]);
    const [first, second] = /** @type {any} */ (stub).requests;
    assert.equal(first.length, 5);
    assert.deepEqual(
      second.map((/** @type {any} */ u) => u.name),
      ['ok1', 'ok2', 'ok3'],
      'the poisoned message is left out whole',
    );
  });

  test('when every message failed because the service is down, it throws so Lambda backs off', async () => {
    const run = await withService(() => [503, { error: 'database_unavailable' }]);
    await stub?.close();
    await assert.rejects(
      run(makeEvent([user('x'), user('y')]), lambdaContext(600)),
      ServiceUnavailableError,
    );
  });

  test('a wrong token does not send good messages to the dead-letter queue, and is said once: what to set, never the token', async () => {
    const run = await withService(() => [401, { error: 'unauthorized' }], {
      INGEST_TOKEN: 'feeder-wrong-token-xyz',
    });
    for (let i = 0; i < 3; i++)
      await assert.rejects(
        run(makeEvent([user(`t${i}`)]), lambdaContext(5_000)),
        ServiceUnavailableError,
      );
    assert.equal(
      /** @type {any} */ (stub).requests.length,
      3,
      'one post an invocation: a refused token is not retried',
    );
    const said = output.logs.filter((l) => l.level === 'ERROR');
    assert.equal(said.length, 1, 'once, not once an invocation');
    assert.match(
      said[0].message,
      /^the service refused the feeder's bearer token \(HTTP 401\)\. Set the feeder's INGEST_TOKEN to the service's INGEST_TOKEN and start it again/,
    );
    assert.deepEqual(
      { status: said[0].status, tokenSent: said[0].tokenSent },
      { status: 401, tokenSent: true },
    );
    assert.ok(
      !JSON.stringify(output.logs).includes('feeder-wrong-token-xyz'),
      'the token is never logged',
    );
  });

  test('no token where the service wants one (403 from a proxy too): said as such', async () => {
    const run = await withService(() => [403, { error: 'forbidden' }]);
    await assert.rejects(
      run(makeEvent([user('n')]), lambdaContext(5_000)),
      ServiceUnavailableError,
    );
    assert.match(
      output.logs.find((l) => l.level === 'ERROR')?.message ?? '',
      /refused the feeder \(HTTP 403\): it wants a bearer token and the feeder sends none/,
    );
  });

  test('a client that may write but not erase (403 at /erasures): the erase messages return, the upserts are stored; said once, what to grant', async () => {
    const run = await withService(
      (items, _n, path) => (path === '/erasures' ? [403, { error: 'forbidden' }] : stored(items)),
      { INGEST_TOKEN: 'feeder-token-xyz' },
    );
    const erase = (/** @type {string} */ email) => ({
      ...makeRecord(JSON.stringify(email)),
      messageAttributes: { operation: { stringValue: 'erase', dataType: 'String' } },
    });
    for (let i = 0; i < 2; i++) {
      const upsert = makeRecord(user(`w${i}`));
      const erasures = [erase(`e${i}@example.com`), erase(`f${i}@example.com`)];
      const result = await run({ Records: [upsert, ...erasures] }, lambdaContext(5_000));
      assert.deepEqual(failures(result), erasures.map((r) => r.messageId).sort());
    }
    assert.deepEqual(/** @type {any} */ (stub).paths, [
      '/users',
      '/erasures',
      '/users',
      '/erasures',
    ]);
    const said = output.logs.filter((l) => l.level === 'ERROR');
    assert.equal(said.length, 1, 'once, not once an invocation');
    assert.match(
      said[0].message,
      /^the service refused the feeder's erasures \(HTTP 403\): its client may not erase\. Give it the right to erase \("erase": true beside its token in INGEST_TOKENS/,
    );
    const warned = output.logs.find((l) => l.message === 'messages not stored');
    assert.ok(
      warned.failures.every((/** @type {any} */ f) => f.kind === 'unavailable'),
      'not poison: the dead-letter queue is not where a missing right belongs',
    );
    assert.ok(!JSON.stringify(output.logs).includes('feeder-token-xyz'));
  });

  test('a 401 after a rotation: the token is read again, once, and the batch is stored with the new one', async (t) => {
    const secrets = await startSecretsManagerStub({
      token: JSON.stringify({ feeder: 'old-token' }),
    });
    t.after(() => secrets.close());
    /** @type {string} */ let accepted = 'Bearer old-token';
    const run = await withService(
      () =>
        /** @type {NonNullable<typeof stub>} */ (stub).headers.at(-1)?.authorization === accepted
          ? stored([1])
          : [401, { error: 'unauthorized' }],
      { ...secrets.env, POST_CHUNK_ITEMS: '1' },
    );
    assert.deepEqual(await run(makeEvent([user('a'), user('b')]), lambdaContext(5_000)), {
      batchItemFailures: [],
    });
    const reads = () =>
      secrets.requests.filter((r) => r.target === 'secretsmanager.GetSecretValue').length;
    assert.equal(reads(), 1, 'read at the cold start only');

    secrets.put(JSON.stringify({ feeder: 'new-token' }));
    accepted = 'Bearer new-token';
    const event = makeEvent([user('c'), user('d'), user('e'), user('f')]);
    assert.deepEqual(
      await run(event, lambdaContext(5_000)),
      { batchItemFailures: [] },
      'every message stored after one read',
    );
    assert.equal(reads(), 2, 'read once more, for the four chunks refused at once');
    assert.equal(
      await run(makeEvent([user('g')]), lambdaContext(5_000)).then(
        (r) => r.batchItemFailures.length,
      ),
      0,
    );
    assert.equal(reads(), 2, 'the new token kept for the next invocations');

    accepted = 'Bearer a-token-nobody-has';
    await assert.rejects(
      run(makeEvent([user('h')]), lambdaContext(5_000)),
      ServiceUnavailableError,
      'refused with the token read again: the batch goes back, as before',
    );
    assert.equal(reads(), 3, 'one read per invocation');
  });

  test('a 401 and the token cannot be read again: the chunk fails as unavailable, posted once; the next invocation reads again', async (t) => {
    const secrets = await startSecretsManagerStub({ token: 'old-token' });
    t.after(() => secrets.close());
    const run = await withService((users) => {
      if (
        /** @type {NonNullable<typeof stub>} */ (stub).headers.at(-1)?.authorization ===
        'Bearer new-token'
      )
        return stored(users);
      // Rotated to a secret the feeder cannot read its token from: the read again fails.
      if (secrets.valueAt('AWSCURRENT') === 'old-token')
        secrets.put(JSON.stringify({ 'another-client': 'x' }));
      return [401, { error: 'unauthorized' }];
    }, secrets.env);
    const reads = () =>
      secrets.requests.filter((r) => r.target === 'secretsmanager.GetSecretValue').length;
    const poison = makeRecord('{"email": ');
    const good = makeRecord(user('b'));
    assert.deepEqual(
      failures(await run({ Records: [good, poison] }, lambdaContext(5_000))),
      [good.messageId, poison.messageId].sort(),
      'answered, not thrown: one message is poison',
    );
    assert.equal(reads(), 2, 'the cold start, then one read again');
    assert.equal(
      /** @type {any} */ (stub).requests.length,
      1,
      'not posted again with the same token',
    );
    const warning = output.logs.find((l) => l.message === 'messages not stored');
    assert.deepEqual(
      warning?.failures.find((/** @type {any} */ f) => f.messageId === good.messageId),
      { messageId: good.messageId, kind: 'unavailable', reason: 'HTTP 401 unauthorized' },
    );

    secrets.put('new-token');
    assert.deepEqual(
      await run(makeEvent([user('c')]), lambdaContext(5_000)),
      { batchItemFailures: [] },
      'read again at the next 401, and stored',
    );
    assert.equal(reads(), 3);
  });

  test('the log line has counts and the request id as correlation id, never a user or the token', async () => {
    const run = await withService(stored, { INGEST_TOKEN: 'feeder-secret-token-xyz' });
    await run(makeEvent([user('private-person')]), lambdaContext(5_000, 'request-id-42'));
    assert.equal(output.logs.length, 1);
    const [line] = output.logs;
    const text = JSON.stringify(line);
    assert.ok(!text.includes('private-person') && !text.includes('feeder-secret-token-xyz'));
    assert.equal(line.message, 'sqs batch fed');
    assert.equal(line.correlation_id, 'request-id-42');
    assert.equal(line.level, 'INFO');
    assert.equal(line.service, 'sluice-feeder');
    assert.deepEqual(
      {
        records: line.records,
        users: line.users,
        usersStored: line.usersStored,
        inserted: line.inserted,
        posts: line.posts,
        retries: line.retries,
        failedMessages: line.failedMessages,
        poisonMessages: line.poisonMessages,
      },
      {
        records: 1,
        users: 1,
        usersStored: 1,
        inserted: 1,
        posts: 1,
        retries: 0,
        failedMessages: 0,
        poisonMessages: 0,
      },
    );
    assert.equal(typeof line.durationMs, 'number');
  });

  test('one CloudWatch EMF record per invocation: users stored, messages failed, poison, retries, posts, duration', async () => {
    const run = await withService((users, n) =>
      n === 1 ? [503, { error: 'database_unavailable' }] : stored(users),
    );
    const good = makeRecord([user('m1'), user('m2')]);
    const poison = makeRecord('{"email": ');
    await run({ Records: [good, poison] }, lambdaContext(10_000));

    assert.equal(output.metrics.length, 1);
    const [emf] = output.metrics;
    const [directive] = emf._aws.CloudWatchMetrics;
    assert.equal(directive.Namespace, 'sluice');
    assert.deepEqual(directive.Dimensions, [['service']]);
    assert.equal(emf.service, 'sluice-feeder');
    assert.ok(Number.isInteger(emf._aws.Timestamp));
    assert.deepEqual(
      Object.fromEntries(directive.Metrics.map((/** @type {any} */ m) => [m.Name, m.Unit])),
      {
        usersStored: 'Count',
        usersUpdated: 'Count',
        usersStale: 'Count',
        usersQuarantined: 'Count',
        usersErased: 'Count',
        erasuresAbsent: 'Count',
        messagesFailed: 'Count',
        poisonMessages: 'Count',
        heldMessages: 'Count',
        retries: 'Count',
        posts: 'Count',
        durationMs: 'Milliseconds',
      },
    );
    assert.deepEqual(
      {
        usersStored: emf.usersStored,
        messagesFailed: emf.messagesFailed,
        poisonMessages: emf.poisonMessages,
        retries: emf.retries,
        posts: emf.posts,
      },
      { usersStored: 2, messagesFailed: 1, poisonMessages: 1, retries: 1, posts: 2 },
    );
    assert.ok(emf.durationMs >= 0);
  });

  test('an invocation that throws (service down) still emits its figures', async () => {
    const run = await withService(() => [503, { error: 'database_unavailable' }]);
    await stub?.close();
    await assert.rejects(run(makeEvent([user('x')]), lambdaContext(600)), ServiceUnavailableError);
    assert.equal(output.metrics.length, 1);
    assert.equal(output.metrics[0].messagesFailed, 1);
    assert.equal(output.metrics[0].usersStored, 0);
  });
  // A chunk refused for a reason that is not an outage used to be retried as one (a 500)
  // or failed whole (another 4xx), and good messages reached the dead-letter queue.
  for (const [what, refusal] of /** @type {const} */ ([
    [
      'its own 500 (with an error id)',
      [
        500,
        {
          error: 'internal',
          message: 'unexpected error; nothing was written',
          errorId: 'e7c0ffee-0000-4000-8000-000000000000',
        },
      ],
    ],
    [
      'a 4xx that names no user',
      [400, { error: 'duplicate_key', message: 'a key is given more than once' }],
    ],
  ])) {
    test(`a chunk refused with ${what} is split by message until only the guilty message fails`, async () => {
      const run = await withService((users) =>
        users.some((u) => u.name === 'guilty') ? [refusal[0], refusal[1]] : stored(users),
      );
      const records = Array.from({ length: 16 }, (_, i) =>
        makeRecord([user(`m${i}a`), { ...user(`m${i}b`), name: i === 11 ? 'guilty' : `m${i}b` }]),
      );
      const result = await run({ Records: records }, lambdaContext(10_000));
      assert.deepEqual(failures(result), [records[11].messageId]);
      const storedNames = /** @type {any} */ (stub).requests
        .filter((users) => !users.some((u) => u.name === 'guilty'))
        .flat()
        .map((u) => u.name);
      assert.equal(
        new Set(storedNames).size,
        30,
        'every user of the 15 good messages was posted in a chunk that was stored',
      );
      assert.ok(
        /** @type {any} */ (stub).requests.length <= 1 + 2 * Math.ceil(Math.log2(16)),
        `a bisection, not a post per message: ${/** @type {any} */ (stub).requests.length} posts`,
      );
      const warning = output.logs.find((l) => l.message === 'messages not stored');
      assert.deepEqual(
        warning?.failures.map((/** @type {any} */ f) => [f.messageId, f.kind]),
        [[records[11].messageId, 'poison']],
      );
      assert.match(
        warning?.failures[0].reason,
        refusal[0] === 500 ? /error id e7c0ffee-/ : /HTTP 400 duplicate_key/,
      );
      assert.ok(
        !JSON.stringify(warning).includes('guilty'),
        'the log names the rule or the error id, never the user',
      );
    });
  }

  test('a 400 naming the first and the last user of its chunk fails their messages; the rest is stored', async () => {
    const run = await withService((users) => {
      const bad = users
        .map((u, index) => (u.name === 'bad' ? { index, field: 'name', message: 'x' } : null))
        .filter(Boolean);
      return bad.length
        ? [400, { error: 'invalid_batch', message: 'no', errors: bad }]
        : stored(users);
    });
    const records = [
      makeRecord({ ...user('f0'), name: 'bad' }),
      makeRecord(user('f1')),
      makeRecord([user('f2'), { ...user('f3'), name: 'bad' }]),
    ];
    const result = await run({ Records: records }, lambdaContext(10_000));
    assert.deepEqual(failures(result), [records[0].messageId, records[2].messageId].sort());
    assert.deepEqual(
      /** @type {any} */ (stub).requests.map((/** @type {any[]} */ users) =>
        users.map((u) => u.email),
      ),
      [
        ['f0@example.com', 'f1@example.com', 'f2@example.com', 'f3@example.com'],
        ['f1@example.com'],
      ],
    );
  });

  test('a 400 names each refused user: its message fails with the field and the rule, in the log', async () => {
    const run = await withService((users) => {
      const bad = users
        .map((u, index) =>
          u.email.startsWith('bad')
            ? { index, field: 'email', message: 'must be a plausible email address' }
            : null,
        )
        .filter(Boolean);
      return bad.length
        ? [400, { error: 'invalid_batch', message: 'no', errors: bad }]
        : stored(users);
    });
    const poisoned = makeRecord([{ email: 'bad-address', name: 'B' }]);
    await run({ Records: [makeRecord(user('fine')), poisoned] }, lambdaContext(10_000));
    const warning = output.logs.find((l) => l.message === 'messages not stored');
    assert.deepEqual(warning?.failures, [
      {
        messageId: poisoned.messageId,
        kind: 'poison',
        reason: 'HTTP 400 invalid_batch: email must be a plausible email address',
      },
    ]);
  });

  test('a 400 invalid_batch naming no user is split by message until only the guilty message fails', async () => {
    const run = await withService((users) =>
      users.some((u) => u.name === 'guilty')
        ? [400, { error: 'invalid_batch', message: 'no', errors: [] }]
        : stored(users),
    );
    const records = Array.from({ length: 8 }, (_, i) =>
      makeRecord([user(`n${i}`), { ...user(`n${i}b`), name: i === 5 ? 'guilty' : `n${i}b` }]),
    );
    const result = await run({ Records: records }, lambdaContext(10_000));
    assert.deepEqual(failures(result), [records[5].messageId]);
    const requests = /** @type {any[][]} */ (/** @type {any} */ (stub).requests);
    assert.deepEqual(
      requests.map((users) => users.length),
      [16, 8, 8, 4, 2, 2, 4],
      'halves by message, in order, the guilty half split again',
    );
    const warning = output.logs.find((l) => l.message === 'messages not stored');
    assert.deepEqual(warning?.failures, [
      {
        messageId: records[5].messageId,
        kind: 'poison',
        reason: 'HTTP 400 invalid_batch naming no user',
      },
    ]);
  });

  for (const [what, errorsOf] of /** @type {const} */ ([
    [
      'only indexes outside the chunk',
      (/** @type {number} */ length) => [
        { index: length, field: 'email', message: 'x' },
        { index: length + 7, field: 'name', message: 'y' },
      ],
    ],
    [
      'one index inside and one outside',
      (/** @type {number} */ length) => [
        { index: 0, field: 'email', message: 'x' },
        { index: length, field: 'name', message: 'y' },
      ],
    ],
    ['a negative index', () => [{ index: -1, field: 'email', message: 'x' }]],
  ])) {
    test(`a 400 invalid_batch naming ${what} fails the chunk's messages in one post, never posted again`, async () => {
      const run = await withService(
        (users) => [400, { error: 'invalid_batch', message: 'no', errors: errorsOf(users.length) }],
        { POST_CHUNK_ITEMS: '3' },
      );
      const records = [
        makeRecord([user('o1'), user('o2')]),
        makeRecord(user('o3')),
        makeRecord(user('o4')),
      ];
      const result = await run({ Records: records }, lambdaContext(10_000));
      assert.deepEqual(
        failures(result),
        records.map((r) => r.messageId).sort(),
        'every message, in the batch response: not thrown',
      );
      assert.deepEqual(
        /** @type {any} */ (stub).requests.map((/** @type {any[]} */ users) => users.length),
        [3, 1],
        'one post a chunk',
      );
      const warning = output.logs.find((l) => l.message === 'messages not stored');
      assert.deepEqual(
        warning?.failures.map((/** @type {any} */ f) => f.kind),
        ['poison', 'poison', 'poison'],
      );
      assert.match(
        warning?.failures[0].reason,
        /^HTTP 400 invalid_batch naming user -?\d+ of a chunk of 3$/,
      );
    });
  }

  test('a 413: the chunk is halved until it passes; one user over the limit alone is poison for its message', async () => {
    const run = await withService((users) =>
      users.length > 2 || users.some((u) => u.name === 'huge')
        ? [413, { error: 'payload_too_large' }]
        : stored(users),
    );
    const records = [
      makeRecord([user('t1'), user('t2')]),
      makeRecord([user('t3'), { ...user('t4'), name: 'huge' }]),
      makeRecord(user('t5')),
    ];
    const result = await run({ Records: records }, lambdaContext(10_000));
    assert.deepEqual(failures(result), [records[1].messageId]);
    const posted = /** @type {any} */ (stub).requests.map((/** @type {any[]} */ users) =>
      users.map((u) => u.name).join(','),
    );
    assert.deepEqual(posted, [
      't1,t2,t3,huge,t5',
      't1,t2,t3',
      't1,t2',
      't3',
      'huge,t5',
      'huge',
      't5',
    ]);
    const warning = output.logs.find((l) => l.message === 'messages not stored');
    assert.deepEqual(warning?.failures, [
      {
        messageId: records[1].messageId,
        kind: 'poison',
        reason: "one user is over the service's body limit (413)",
      },
    ]);
  });

  test('a 502 from the way there is an outage: retried, not split', async () => {
    const run = await withService((users, n) =>
      n === 1 ? [502, { message: 'bad gateway' }] : stored(users),
    );
    const result = await run(makeEvent([user('p1'), user('p2')]), lambdaContext(10_000));
    assert.deepEqual(result, { batchItemFailures: [] });
    assert.deepEqual(
      /** @type {any} */ (stub).requests.map((r) => r.length),
      [2, 2],
    );
  });

  test("CONFLICT_RESOLUTION and the resolution message attribute choose each post's Prefer; modes never share a post", async () => {
    const run = await withService(stored, { CONFLICT_RESOLUTION: 'merge' });
    const withAttribute = (/** @type {any} */ body, /** @type {string} */ value) => {
      const r = makeRecord(body);
      r.messageAttributes = {
        resolution: {
          stringValue: value,
          stringListValues: [],
          binaryListValues: [],
          dataType: 'String',
          binaryValue: undefined,
        },
      };
      return r;
    };
    const records = [
      makeRecord(user('default-merge')),
      withAttribute(user('asked-ignore'), 'ignore-duplicates'),
      withAttribute(user('asked-merge'), 'merge-duplicates'),
      withAttribute(user('unknown'), 'overwrite'),
    ];
    const result = await run({ Records: records }, lambdaContext(10_000));
    assert.deepEqual(
      failures(result),
      [records[3].messageId],
      'an unknown resolution is poison for its message alone',
    );
    const posts = /** @type {any} */ (stub).requests.map((users, i) => [
      /** @type {any} */ (stub).headers[i].prefer,
      users.map((u) => u.name).sort(),
    ]);
    assert.deepEqual(posts.sort(), [
      ['resolution=ignore-duplicates, invalid=quarantine', ['asked-ignore']],
      ['resolution=merge-duplicates, invalid=quarantine', ['asked-merge', 'default-merge']],
    ]);
  });
  describe('a FIFO batch (records with a MessageGroupId)', () => {
    /** A 400 naming every user whose name starts with "bad". @param {any[]} users */
    const refuseBad = (users) => {
      const bad = users
        .map((u, index) =>
          u.name.startsWith('bad') ? { index, field: 'name', message: 'x' } : null,
        )
        .filter(Boolean);
      return /** @type {[number, unknown]} */ (
        bad.length ? [400, { error: 'invalid_batch', message: 'no', errors: bad }] : stored(users)
      );
    };

    test("the second message of a group fails: it and the group's later messages are reported, the other groups' are stored", async () => {
      const run = await withService(refuseBad);
      const a1 = makeRecord([user('a1')], { group: 'A' });
      const b1 = makeRecord([user('b1')], { group: 'B' });
      const a2 = makeRecord([user('a2'), { ...user('a2-bad'), name: 'bad' }], { group: 'A' });
      const b2 = makeRecord([user('b2')], { group: 'B' });
      const a3 = makeRecord([user('a3')], { group: 'A' });
      const c1 = makeRecord([user('c1')], { group: 'C' });
      const result = await run({ Records: [a1, b1, a2, b2, a3, c1] }, lambdaContext(10_000));
      assert.deepEqual(failures(result), [a2.messageId, a3.messageId].sort());
      const [first, second] = /** @type {any} */ (stub).requests;
      assert.deepEqual(
        first.map((/** @type {any} */ u) => u.name),
        ['a1', 'b1', 'a2', 'bad', 'b2', 'a3', 'c1'],
        "one chunk, in the batch's order",
      );
      assert.deepEqual(
        second.map((/** @type {any} */ u) => u.name),
        ['a1', 'b1', 'b2', 'c1'],
        'posted again without the failed message and what follows it in its group',
      );
      const warning = output.logs.find((l) => l.message === 'messages not stored');
      assert.deepEqual(
        warning?.failures.map((/** @type {any} */ f) => [f.messageId, f.kind]).sort(),
        [
          [a2.messageId, 'poison'],
          [a3.messageId, 'held'],
        ].sort(),
      );
      assert.equal(output.logs.find((l) => l.message === 'sqs batch fed')?.heldMessages, 1);
    });

    test("a message whose users span two chunks fails in the second: its group's later message, in that chunk, is not posted again", async () => {
      // Chunks of 2: [a1, a2's first user] is stored; [a2's bad user, a3] is refused whole. a2 fails
      // (half stored: it comes back whole and is applied again), and a3 with it.
      const run = await withService(refuseBad, { POST_CHUNK_ITEMS: '2' });
      const a1 = makeRecord([user('a1')], { group: 'A' });
      const a2 = makeRecord([user('a2'), { ...user('a2-bad'), name: 'bad' }], { group: 'A' });
      const a3 = makeRecord([user('a3')], { group: 'A' });
      const result = await run({ Records: [a1, a2, a3] }, lambdaContext(10_000));
      assert.deepEqual(failures(result), [a2.messageId, a3.messageId].sort());
      const posted = /** @type {any} */ (stub).requests.map((/** @type {any[]} */ users) =>
        users.map((u) => u.name),
      );
      assert.deepEqual(
        posted,
        [
          ['a1', 'a2'],
          ['bad', 'a3'],
        ],
        'a3 is not posted again once a2 failed',
      );
    });

    test("a group's chunks go one after another, in order, even when one is retried; other groups are not held up", async () => {
      let refusedOnce = false;
      const run = await withService(
        (users) => {
          if (users[0].name === 'a1' && !refusedOnce) {
            refusedOnce = true;
            return [503, { error: 'database_unavailable' }];
          }
          return stored(users);
        },
        { POST_CHUNK_ITEMS: '1', POST_CONCURRENCY: '4' },
      );
      const records = [
        makeRecord(user('a1'), { group: 'A' }),
        makeRecord(user('a2'), { group: 'A' }),
        makeRecord(user('b1'), { group: 'B' }),
        makeRecord(user('a3'), { group: 'A' }),
      ];
      const result = await run({ Records: records }, lambdaContext(10_000));
      assert.deepEqual(result, { batchItemFailures: [] });
      const names = /** @type {any} */ (stub).requests.map(
        (/** @type {any[]} */ users) => users[0].name,
      );
      assert.deepEqual(
        names.filter((/** @type {string} */ n) => n.startsWith('a')),
        ['a1', 'a1', 'a2', 'a3'],
        "a2 waited for a1's retry",
      );
      assert.ok(
        names.indexOf('b1') < names.lastIndexOf('a1'),
        `b1 went while a1 was retried: ${names}`,
      );
    });

    test("an outage on one group's chunk: that group fails from there on, the others are stored, nothing is thrown", async () => {
      const run = await withService(
        (users) =>
          users.some((u) => u.name === 'a2')
            ? [503, { error: 'database_unavailable' }]
            : stored(users),
        { POST_CHUNK_ITEMS: '1', SAFETY_MARGIN_MS: '400' },
      );
      const records = [
        makeRecord(user('a1'), { group: 'A' }),
        makeRecord(user('a2'), { group: 'A' }),
        makeRecord(user('a3'), { group: 'A' }),
        makeRecord(user('b1'), { group: 'B' }),
      ];
      const result = await run({ Records: records }, lambdaContext(1_500));
      assert.deepEqual(failures(result), [records[1].messageId, records[2].messageId].sort());
      const names = /** @type {any} */ (stub).requests.map(
        (/** @type {any[]} */ users) => users[0].name,
      );
      assert.ok(!names.includes('a3'), 'a3 waits for a2: never posted');
      assert.ok(names.includes('a1') && names.includes('b1'));
    });

    test('a new chunk where the resolution changes, so each post has one Prefer and the group stays in order', async () => {
      const run = await withService(stored);
      /** @param {unknown} body @param {string} value */
      const asking = (body, value) => ({
        ...makeRecord(body, { group: 'A' }),
        messageAttributes: { resolution: { stringValue: value } },
      });
      const records = [
        makeRecord(user('i1'), { group: 'A' }),
        asking(user('m1'), 'merge-duplicates'),
        asking(user('m2'), 'merge-duplicates'),
        makeRecord(user('i2'), { group: 'A' }),
      ];
      assert.deepEqual(await run({ Records: records }, lambdaContext(10_000)), {
        batchItemFailures: [],
      });
      const posts = /** @type {any} */ (stub).requests.map(
        (/** @type {any[]} */ users, /** @type {number} */ i) => [
          /** @type {any} */ (stub).headers[i].prefer,
          users.map((u) => u.name),
        ],
      );
      const Q = ', invalid=quarantine';
      assert.deepEqual(posts, [
        [`resolution=ignore-duplicates${Q}`, ['i1']],
        [`resolution=merge-duplicates${Q}`, ['m1', 'm2']],
        [`resolution=ignore-duplicates${Q}`, ['i2']],
      ]);
    });

    test('bad JSON in a message holds back its group from the start: the later messages are not posted', async () => {
      const run = await withService(stored);
      const records = [
        makeRecord('{"email": ', { group: 'A' }),
        makeRecord(user('a2'), { group: 'A' }),
        makeRecord(user('b1'), { group: 'B' }),
      ];
      const result = await run({ Records: records }, lambdaContext(10_000));
      assert.deepEqual(failures(result), [records[0].messageId, records[1].messageId].sort());
      assert.deepEqual(
        /** @type {any} */ (stub).requests.flat().map((/** @type {any} */ u) => u.name),
        ['b1'],
      );
    });

    test('every message failed for an outage (some held behind it): it throws, as on a standard queue', async () => {
      const run = await withService(() => [503, { error: 'database_unavailable' }]);
      await stub?.close();
      await assert.rejects(
        run(
          {
            Records: [
              makeRecord(user('a1'), { group: 'A' }),
              makeRecord(user('a2'), { group: 'A' }),
            ],
          },
          lambdaContext(600),
        ),
        ServiceUnavailableError,
      );
    });
  });
});
