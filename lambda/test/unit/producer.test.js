import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, mock, test } from 'node:test';
import fc from 'fast-check';
import {
  MAX_MESSAGE_BYTES,
  SINGLE_GROUP,
  changeStamper,
  messageGroupOf,
  packMessages,
  sendMessages,
} from '../../local/producer.js';

/** @template T @param {AsyncIterable<T>} iterable */
async function collect(iterable) {
  /** @type {T[]} */
  const out = [];
  for await (const x of iterable) out.push(x);
  return out;
}

/** @param {{ body: string }} message @param {number} perMessage */
const usersOf = (message, perMessage) =>
  perMessage === 1 ? [JSON.parse(message.body)] : JSON.parse(message.body);

/** What SQS counts for the resolution attribute: its name, data type and value. @param {string} value */
const attributeBytes = (value) => Buffer.byteLength(`resolutionString${value}`);

/** A user whose JSON is `bytes` long (ASCII). @param {number} i @param {number} bytes */
function userOfSize(i, bytes) {
  const user = { email: `u${i}@example.com`, name: '' };
  user.name = 'n'.repeat(bytes - Buffer.byteLength(JSON.stringify(user)));
  return user;
}

describe('packMessages (unit)', () => {
  test('up to perMessage users per message, as a JSON array; one per message is the user object itself', async () => {
    const users = Array.from({ length: 7 }, (_, i) => ({
      email: `u${i}@example.com`,
      name: `U${i}`,
    }));
    const three = await collect(packMessages(users, 3));
    assert.deepEqual(
      three.map((m) => m.users),
      [3, 3, 1],
    );
    assert.deepEqual(
      three.flatMap((m) => JSON.parse(m.body)),
      users,
    );
    const one = await collect(packMessages(users, 1));
    assert.equal(one.length, 7);
    assert.deepEqual(JSON.parse(one[0].body), users[0]);
  });

  test('a message is closed early rather than pass 256 KiB', async () => {
    // Three users of a third of the limit each: the brackets and commas make the third not fit.
    const third = Math.floor(MAX_MESSAGE_BYTES / 3);
    const messages = await collect(
      packMessages([userOfSize(0, third), userOfSize(1, third), userOfSize(2, third)], 100),
    );
    assert.deepEqual(
      messages.map((m) => m.users),
      [2, 1],
    );
  });

  test('every message, not only the first, is packed to within a byte of the limit and never past it', async () => {
    const first = userOfSize(0, MAX_MESSAGE_BYTES - 3);
    // Two users whose message ([a,b]) would be one byte over: they go apart.
    const over = await collect(
      packMessages([first, userOfSize(1, 1000), userOfSize(2, MAX_MESSAGE_BYTES - 1002)], 100),
    );
    assert.deepEqual(
      over.map((m) => m.users),
      [1, 1, 1],
    );
    // Two that make a message one byte under the limit: they go together.
    const under = await collect(
      packMessages([first, userOfSize(1, 1000), userOfSize(2, MAX_MESSAGE_BYTES - 1004)], 100),
    );
    assert.deepEqual(
      under.map((m) => m.users),
      [1, 2],
    );
    for (const m of [...over, ...under])
      assert.ok(
        Buffer.byteLength(m.body) <= MAX_MESSAGE_BYTES,
        `a message of ${Buffer.byteLength(m.body)} bytes`,
      );
    assert.equal(Buffer.byteLength(under[1].body), MAX_MESSAGE_BYTES - 1);
  });

  test("with a resolution, its message attribute's bytes come out of the body's room (SQS counts them)", async () => {
    const users = [userOfSize(0, MAX_MESSAGE_BYTES - 1000), userOfSize(1, 990)];
    // [a,b] is 7 bytes under the limit: one message alone, two once 32 bytes of attribute go with it.
    assert.deepEqual(
      (await collect(packMessages(users, 100))).map((m) => m.users),
      [2],
    );
    const merged = await collect(packMessages(users, 100, { resolution: 'merge-duplicates' }));
    assert.deepEqual(
      merged.map((m) => m.users),
      [1, 1],
    );
    for (const m of merged)
      assert.ok(
        Buffer.byteLength(m.body) + attributeBytes('merge-duplicates') <= MAX_MESSAGE_BYTES,
      );
  });

  test("erasures: emails and objects packed as given; the operation attribute's bytes come out of the room", async () => {
    const erasures = [
      'a@example.com',
      { email: 'b@example.com', changedAt: '2024-05-01T10:00:00Z' },
    ];
    assert.deepEqual(
      (await collect(packMessages(erasures, 100, { operation: 'erase' }))).map((m) =>
        JSON.parse(m.body),
      ),
      [erasures],
    );
    // Two emails 10 bytes under the limit together: one message, two once the attribute goes too.
    const email = (/** @type {string} */ c) =>
      `${c.repeat(MAX_MESSAGE_BYTES / 2 - 20)}@example.com`;
    const big = [email('a'), email('b')];
    big[1] = big[1].slice(Buffer.byteLength(JSON.stringify(big)) - MAX_MESSAGE_BYTES + 10);
    assert.equal(Buffer.byteLength(JSON.stringify(big)), MAX_MESSAGE_BYTES - 10);
    assert.deepEqual(
      (await collect(packMessages(big, 100))).map((m) => m.users),
      [2],
    );
    const packed = await collect(packMessages(big, 100, { operation: 'erase' }));
    assert.deepEqual(
      packed.map((m) => m.users),
      [1, 1],
    );
    for (const m of packed)
      assert.ok(
        Buffer.byteLength(m.body) + Buffer.byteLength('operationStringerase') <= MAX_MESSAGE_BYTES,
      );
  });

  test('a user that cannot fit in any message stops the run with its size', async () => {
    await assert.rejects(
      collect(packMessages([userOfSize(0, MAX_MESSAGE_BYTES)], 10)),
      /over SQS's 262144-byte message limit/,
    );
  });

  test('any users, any perMessage: every message within the size limit and perMessage, every user once and in order', async () => {
    // Mostly small names, often tens of kilobytes in any script, so that messages meet the limit.
    const bigName = fc
      .tuple(
        fc.string({ unit: 'grapheme', minLength: 1, maxLength: 6 }),
        fc.integer({ min: 1_000, max: 120_000 }),
      )
      .map(([piece, bytes]) =>
        piece.repeat(Math.max(1, Math.floor(bytes / Buffer.byteLength(piece)))),
      );
    const user = fc.record(
      {
        email: fc.emailAddress(),
        name: fc.oneof(fc.string({ unit: 'grapheme', maxLength: 40 }), bigName),
      },
      { noNullPrototype: true },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(user, { maxLength: 30 }),
        fc.integer({ min: 1, max: 50 }),
        async (users, perMessage) => {
          const messages = await collect(packMessages(users, perMessage));
          for (const m of messages) {
            assert.ok(
              Buffer.byteLength(m.body) <= MAX_MESSAGE_BYTES,
              `a message of ${Buffer.byteLength(m.body)} bytes`,
            );
            assert.ok(m.users >= 1 && m.users <= perMessage);
            assert.equal(usersOf(m, perMessage).length, m.users);
          }
          assert.deepEqual(
            messages.flatMap((m) => usersOf(m, perMessage)),
            users,
          );
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('packMessages with message groups (unit, for a FIFO queue)', () => {
  test("a user's group is a bucket of a hash of its email as stored (lower-cased): the same for every change of that user", () => {
    assert.equal(
      messageGroupOf({ email: 'Ada@Example.com', name: 'A' }, 16),
      messageGroupOf({ email: 'ada@example.com', name: 'B' }, 16),
    );
    const groups = new Set(
      Array.from({ length: 2000 }, (_, i) => messageGroupOf({ email: `u${i}@example.com` }, 16)),
    );
    assert.equal(groups.size, 16, 'every group is used');
    for (const g of groups) assert.match(g, /^users-([0-9]|1[0-5])$/);
    assert.match(
      messageGroupOf({ name: 'no email' }, 16),
      /^users-\d+$/,
      'a user without an email (the service will refuse it) still has a group',
    );
  });

  test("an erasure, an email alone or an object, takes the group of the user's changes", () => {
    const group = messageGroupOf({ email: 'ada@example.com', name: 'A' }, 32);
    assert.equal(messageGroupOf('Ada@Example.com', 32), group);
    assert.equal(messageGroupOf({ email: 'ada@example.com' }, 32), group);
  });

  test("any users, any perMessage and groups: a message holds one group only, and each user's changes keep their order", async () => {
    const change = fc.record(
      {
        email: fc.constantFrom(...Array.from({ length: 12 }, (_, i) => `p${i}@example.com`)),
        name: fc.string({ maxLength: 8 }),
      },
      { noNullPrototype: true },
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(change, { maxLength: 60 }),
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 1, max: 8 }),
        async (users, perMessage, groups) => {
          const messages = await collect(packMessages(users, perMessage, { groups }));
          for (const m of messages) {
            const inIt = usersOf(m, perMessage);
            assert.ok(m.users >= 1 && m.users <= perMessage && inIt.length === m.users);
            assert.ok(
              inIt.every((/** @type {any} */ u) => messageGroupOf(u, groups) === m.group),
              'one group a message',
            );
          }
          // Read back group by group, in the order of each group's messages: every user's changes in the order sent.
          for (const email of new Set(users.map((u) => u.email))) {
            const sent = users.filter((u) => u.email === email);
            const packed = messages
              .flatMap((m) => usersOf(m, perMessage))
              .filter((/** @type {any} */ u) => u.email === email);
            assert.deepEqual(packed, sent);
          }
          assert.equal(
            messages.reduce((n, m) => n + m.users, 0),
            users.length,
          );
        },
      ),
      { numRuns: 200 },
    );
  });
});

/**
 * An SQS stand-in for SendMessageBatch: `fail(entry, call)` says which entries it refuses.
 * @param {(entry: { Id: string, MessageBody: string }, call: number) => boolean} [fail]
 */
function fakeSqs(fail = () => false) {
  /** @type {{ Id: string, MessageBody: string }[][]} */
  const calls = [];
  return {
    calls,
    sqs: /** @type {any} */ ({
      send: async (/** @type {any} */ command) => {
        const entries = command.input.Entries;
        calls.push(entries);
        const failed = entries.filter((/** @type {any} */ e) => fail(e, calls.length));
        return {
          Successful: entries
            .filter((/** @type {any} */ e) => !failed.includes(e))
            .map((/** @type {any} */ e) => ({ Id: e.Id })),
          Failed: failed.map((/** @type {any} */ e) => ({ Id: e.Id, Message: 'throttled' })),
        };
      },
    }),
  };
}

/** @param {number} n @param {number} [bytes] */
async function* messages(n, bytes = 10) {
  for (let i = 0; i < n; i++) yield { body: `${i}`.padEnd(bytes, '.'), users: 2 };
}

/** Runs a promise to the end, firing every timer it waits on at once (the backoff sleeps). @template T @param {Promise<T>} promise */
async function withTimersRun(promise) {
  let done = false;
  promise.finally(() => (done = true)).catch(() => {});
  while (!done) {
    await new Promise((resolve) => setImmediate(resolve));
    mock.timers.runAll();
  }
  return promise;
}

describe('sendMessages (unit, SQS stand-in, mocked timers)', () => {
  beforeEach(() => mock.timers.enable({ apis: ['setTimeout'] }));
  afterEach(() => mock.timers.reset());

  test('SendMessageBatch of at most 10 entries; the totals count messages and users', async () => {
    const { sqs, calls } = fakeSqs();
    /** @type {[number, number][]} */
    const progress = [];
    const totals = await withTimersRun(
      sendMessages({
        sqs,
        queueUrl: 'q',
        messages: messages(25),
        onSent: (users, n) => progress.push([users, n]),
      }),
    );
    assert.deepEqual(
      calls.map((c) => c.length).sort((a, b) => b - a),
      [10, 10, 5],
    );
    assert.deepEqual(totals, { messages: 25, users: 50, retries: 0 });
    assert.deepEqual(
      progress.reduce((a, [u, n]) => [a[0] + u, a[1] + n], [0, 0]),
      [50, 25],
    );
  });

  test("a batch's bodies together stay within SQS's 256 KiB", async () => {
    const { sqs, calls } = fakeSqs();
    await withTimersRun(sendMessages({ sqs, queueUrl: 'q', messages: messages(12, 100_000) }));
    for (const entries of calls)
      assert.ok(
        entries.reduce((n, e) => n + Buffer.byteLength(e.MessageBody), 0) <= MAX_MESSAGE_BYTES,
      );
    assert.equal(calls.flat().length, 12);
  });

  test("with a resolution, a batch's bodies and their attributes together stay within 256 KiB", async () => {
    const { sqs, calls } = fakeSqs();
    // Two bodies 20 bytes under the limit together; their two 32-byte attributes are not.
    await withTimersRun(
      sendMessages({
        sqs,
        queueUrl: 'q',
        messages: messages(2, MAX_MESSAGE_BYTES / 2 - 10),
        resolution: 'merge-duplicates',
      }),
    );
    assert.deepEqual(
      calls.map((c) => c.length),
      [1, 1],
    );
    for (const entries of calls) {
      for (const e of entries)
        assert.deepEqual(/** @type {any} */ (e).MessageAttributes, {
          resolution: { DataType: 'String', StringValue: 'merge-duplicates' },
        });
      assert.ok(
        entries.reduce(
          (n, e) => n + Buffer.byteLength(e.MessageBody) + attributeBytes('merge-duplicates'),
          0,
        ) <= MAX_MESSAGE_BYTES,
      );
    }
  });

  test('with the operation erase, each message carries it as its operation attribute', async () => {
    const { sqs, calls } = fakeSqs();
    await withTimersRun(
      sendMessages({ sqs, queueUrl: 'q', messages: messages(3), operation: 'erase' }),
    );
    assert.deepEqual(
      calls.flat().map((e) => /** @type {any} */ (e).MessageAttributes),
      Array(3).fill({ operation: { DataType: 'String', StringValue: 'erase' } }),
    );
  });

  test('entries SQS refuses are sent again, alone, until they pass', async () => {
    // Entry 3 of the first batch is refused twice.
    const { sqs, calls } = fakeSqs((e, call) => e.MessageBody.startsWith('3.') && call <= 2);
    const totals = await withTimersRun(
      sendMessages({ sqs, queueUrl: 'q', messages: messages(10), concurrency: 1 }),
    );
    assert.deepEqual(
      calls.map((c) => c.map((e) => e.MessageBody[0])),
      [['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'], ['3'], ['3']],
    );
    assert.deepEqual(totals, { messages: 10, users: 20, retries: 2 });
  });

  test('a message still refused after maxAttempts stops the run with an error', async () => {
    const { sqs, calls } = fakeSqs((e) => e.MessageBody.startsWith('0.'));
    await assert.rejects(
      withTimersRun(sendMessages({ sqs, queueUrl: 'q', messages: messages(3), maxAttempts: 4 })),
      /1 messages still failed after 4 attempts/,
    );
    assert.equal(calls.length, 4);
  });

  test('a failed call (the network, the SDK) counts as every entry refused, and is retried', async () => {
    let calls = 0;
    const sqs = /** @type {any} */ ({
      send: async (/** @type {any} */ command) => {
        if (++calls === 1) throw new Error('socket hang up');
        return {
          Successful: command.input.Entries.map((/** @type {any} */ e) => ({ Id: e.Id })),
          Failed: [],
        };
      },
    });
    assert.deepEqual(
      await withTimersRun(sendMessages({ sqs, queueUrl: 'q', messages: messages(4) })),
      { messages: 4, users: 8, retries: 1 },
    );
  });
  describe('to a FIFO queue', () => {
    const FIFO_URL = 'http://sqs.local/000000000000/sluice-users.fifo';
    /** @param {number} n @param {(i: number) => string} groupOf */
    async function* grouped(n, groupOf) {
      for (let i = 0; i < n; i++) yield { body: `${i}.`, users: 1, group: groupOf(i) };
    }
    /** @param {any} entry */
    const bodyOf = (entry) => entry.MessageBody.split('.')[0];

    test("every message goes with its group and a deduplication id of its own, within SQS's limits; none to a standard queue", async () => {
      const { sqs, calls } = fakeSqs();
      await withTimersRun(
        sendMessages({ sqs, queueUrl: FIFO_URL, messages: grouped(30, (i) => `users-${i % 15}`) }),
      );
      const entries = /** @type {any[]} */ (calls.flat());
      assert.equal(entries.length, 30);
      for (const e of entries) {
        assert.equal(e.MessageGroupId, `users-${Number(bodyOf(e)) % 15}`);
        assert.match(
          e.MessageDeduplicationId,
          /^[A-Za-z0-9!-/:-@[-`{-~]{1,128}$/,
          'at most 128 of the characters SQS allows',
        );
      }
      assert.equal(
        new Set(entries.map((e) => e.MessageDeduplicationId)).size,
        30,
        'one id a message, even for equal bodies',
      );
      const standard = fakeSqs();
      await withTimersRun(
        sendMessages({ sqs: standard.sqs, queueUrl: 'q', messages: grouped(3, () => 'users-1') }),
      );
      assert.ok(
        standard.calls
          .flat()
          .every(
            (/** @type {any} */ e) =>
              e.MessageGroupId === undefined && e.MessageDeduplicationId === undefined,
          ),
      );
    });

    test('messages packed without groups all go in one group, so one order for all', async () => {
      const { sqs, calls } = fakeSqs();
      await withTimersRun(
        sendMessages({ sqs, queueUrl: FIFO_URL, messages: messages(3), concurrency: 4 }),
      );
      assert.deepEqual(
        calls.flat().map((/** @type {any} */ e) => e.MessageGroupId),
        [SINGLE_GROUP, SINGLE_GROUP, SINGLE_GROUP],
      );
      assert.deepEqual(
        calls.map((c) => c.length),
        [1, 1, 1],
        'never two of one group in one call',
      );
    });

    test("a group's messages reach SQS in order: never two in one call, none while an earlier one is being retried", async () => {
      // Message 0 (group A) is refused twice; messages 1..9 alternate A, B, C. With 8 calls in flight.
      let attemptsOfFirst = 0;
      /** @type {any[]} what SQS took, in order */
      const enqueued = [];
      const { sqs, calls } = fakeSqs((e) => {
        const refused = bodyOf(e) === '0' && ++attemptsOfFirst <= 2;
        if (!refused) enqueued.push(e);
        return refused;
      });
      await withTimersRun(
        sendMessages({
          sqs,
          queueUrl: FIFO_URL,
          messages: grouped(10, (i) => 'ABC'[i % 3]),
          concurrency: 8,
        }),
      );
      for (const entries of calls) {
        const groups = entries.map((/** @type {any} */ e) => e.MessageGroupId);
        assert.equal(
          new Set(groups).size,
          groups.length,
          `one message a group per call: ${groups}`,
        );
      }
      for (const group of 'ABC') {
        const order = enqueued
          .filter((e) => e.MessageGroupId === group)
          .map(bodyOf)
          .map(Number);
        assert.deepEqual(
          order,
          [...order].sort((a, b) => a - b),
          `group ${group} enqueued in order: ${order}`,
        );
      }
      assert.equal(enqueued.length, 10);
      const retried = calls
        .flat()
        .filter((/** @type {any} */ e) => bodyOf(e) === '0')
        .map((/** @type {any} */ e) => e.MessageDeduplicationId);
      assert.equal(retried.length, 3);
      assert.equal(new Set(retried).size, 1, 'a retry keeps its deduplication id');
    });
  });
});

describe('changeStamper (unit): npm run produce -- --stamp-changed-at', () => {
  test('each user without changedAt gets the time it was produced, to the microsecond, strictly increasing; one with it keeps its own', () => {
    let clock = Date.parse('2026-11-26T10:00:00Z') + 0.0005;
    const stamp = changeStamper(() => clock);
    const a = /** @type {Record<string, string>} */ (stamp({ email: 'a@x.io', name: 'A' }));
    const b = /** @type {Record<string, string>} */ (stamp({ email: 'b@x.io', name: 'B' }));
    clock += 2.25;
    const c = /** @type {Record<string, string>} */ (stamp({ email: 'c@x.io', name: 'C' }));
    assert.deepEqual(
      [a.changedAt, b.changedAt, c.changedAt],
      ['2026-11-26T10:00:00.000000Z', '2026-11-26T10:00:00.000001Z', '2026-11-26T10:00:00.002250Z'],
    );
    assert.deepEqual(
      stamp({ email: 'd@x.io', name: 'D', changedAt: '2020-01-01T00:00:00+01:00' }),
      { email: 'd@x.io', name: 'D', changedAt: '2020-01-01T00:00:00+01:00' },
    );
    assert.equal(stamp('not a user'), 'not a user');
  });

  test("the stamps it gives pass the service's validation", async () => {
    const { checkUser } = await import('../../../service/src/users/user-schema.js');
    const stamp = changeStamper();
    // A row (an object); an invalid user would give its problems (an array).
    for (let i = 0; i < 100; i++)
      assert.equal(Array.isArray(checkUser(stamp({ email: `u${i}@x.io`, name: 'U' }), i)), false);
  });
});
