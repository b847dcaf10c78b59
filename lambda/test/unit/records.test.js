import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { unpackRecords } from '../../src/records.js';
import { makeRecord } from '../support/sqs-events.js';

const user = (/** @type {string} */ tag) => ({ email: `${tag}@example.com`, name: tag });

describe('unpackRecords (unit)', () => {
  test('one user or an array of users per body; every item remembers its message, in order', () => {
    const single = makeRecord(user('a'));
    const many = makeRecord([user('b'), user('c')]);
    const { items, poisoned } = unpackRecords([single, many]);
    const upsert = { operation: 'upsert', resolution: 'ignore', invalid: 'quarantine' };
    assert.deepEqual(items, [
      { messageId: single.messageId, user: user('a'), ...upsert },
      { messageId: many.messageId, user: user('b'), ...upsert },
      { messageId: many.messageId, user: user('c'), ...upsert },
    ]);
    assert.equal(poisoned.size, 0);
  });

  test("a message's resolution attribute overrides the feeder's; an unknown one is poison for that message alone", () => {
    /** @param {unknown} body @param {string} value */
    const withResolution = (body, value) => ({
      ...makeRecord(body),
      messageAttributes: { resolution: { stringValue: value } },
    });
    const merged = withResolution(user('m'), 'merge-duplicates');
    const ignored = withResolution(user('i'), 'ignore-duplicates');
    const plain = makeRecord(user('p'));
    const unknown = withResolution(user('u'), 'upsert');
    const { items, poisoned } = unpackRecords([merged, ignored, plain, unknown], 'merge');
    assert.deepEqual(
      items.map((i) => [i.messageId, i.resolution]),
      [
        [merged.messageId, 'merge'],
        [ignored.messageId, 'ignore'],
        [plain.messageId, 'merge'],
      ],
    );
    assert.deepEqual([...poisoned.keys()], [unknown.messageId]);
    assert.match(
      poisoned.get(unknown.messageId)?.reason ?? '',
      /merge-duplicates or ignore-duplicates/,
    );
  });

  test("a message's invalid attribute overrides the feeder's INVALID_USERS; an unknown one is poison for that message alone", () => {
    /** @param {unknown} body @param {string} value */
    const withInvalid = (body, value) => ({
      ...makeRecord(body),
      messageAttributes: { invalid: { stringValue: value } },
    });
    const kept = withInvalid(user('q'), 'quarantine');
    const refused = withInvalid(user('r'), 'refuse');
    const plain = makeRecord(user('p'));
    const unknown = withInvalid(user('u'), 'skip');
    const { items, poisoned } = unpackRecords([kept, refused, plain, unknown], 'ignore', 'refuse');
    assert.deepEqual(
      items.map((i) => [i.messageId, i.invalid]),
      [
        [kept.messageId, 'quarantine'],
        [refused.messageId, 'refuse'],
        [plain.messageId, 'refuse'],
      ],
    );
    assert.deepEqual([...poisoned.keys()], [unknown.messageId]);
    assert.match(poisoned.get(unknown.messageId)?.reason ?? '', /quarantine or refuse/);
  });

  test("users are passed on as sent: checking them is the service's job", () => {
    const odd = { email: 'not-an-email', extra: [1, 2], name: '' };
    assert.deepEqual(
      unpackRecords([makeRecord([odd, {}])]).items.map((i) => i.user),
      [odd, {}],
    );
  });

  for (const [body, why] of /** @type {[unknown, string][]} */ ([
    ['{"email": ', 'JSON cut short'],
    ['', 'an empty body'],
    ['not json', 'not JSON at all'],
  ])) {
    test(`${why}: that message is poison, with "not JSON"`, () => {
      const bad = makeRecord(body);
      const { items, poisoned } = unpackRecords([bad]);
      assert.deepEqual(items, []);
      assert.deepEqual(poisoned.get(bad.messageId), { kind: 'poison', reason: 'body is not JSON' });
    });
  }

  for (const [body, why] of /** @type {[unknown, string][]} */ ([
    [[], 'an empty array'],
    [null, 'null'],
    [42, 'a number'],
    ['"a string"', 'a JSON string'],
    [[user('ok'), 5], 'an array with a number in it'],
    [[user('ok'), null], 'an array with null in it'],
    [[[user('nested')]], 'an array of arrays'],
  ])) {
    test(`${why}: that message is poison, and none of its users is taken`, () => {
      const bad = makeRecord(body);
      const { items, poisoned } = unpackRecords([bad]);
      assert.deepEqual(items, []);
      assert.match(poisoned.get(bad.messageId)?.reason ?? '', /user object or a non-empty array/);
    });
  }

  test('a poison message fails alone: the good messages around it are unpacked', () => {
    const before = makeRecord(user('before'));
    const bad = makeRecord('{"email": ');
    const after = makeRecord([user('after')]);
    const { items, poisoned } = unpackRecords([before, bad, after]);
    assert.deepEqual(
      items.map((i) => i.messageId),
      [before.messageId, after.messageId],
    );
    assert.deepEqual([...poisoned.keys()], [bad.messageId]);
  });

  test('any batch: each message is either unpacked whole or poison, never both, and nothing is lost', () => {
    const anyUser = fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), {
      maxKeys: 4,
    });
    const anyBody = fc.oneof(
      anyUser,
      fc.array(anyUser, { maxLength: 5 }),
      fc.jsonValue({ maxDepth: 2 }),
      fc.string({ maxLength: 20 }),
    );
    fc.assert(
      fc.property(fc.array(anyBody, { maxLength: 10 }), (bodies) => {
        const records = bodies.map((b) =>
          makeRecord(typeof b === 'string' ? b : JSON.stringify(b)),
        );
        const { items, poisoned } = unpackRecords(records);
        for (const record of records) {
          const own = items.filter((i) => i.messageId === record.messageId);
          if (poisoned.has(record.messageId)) {
            if (own.length > 0) return false;
            continue;
          }
          const parsed = JSON.parse(record.body);
          assert.deepEqual(
            own.map((i) => i.user),
            Array.isArray(parsed) ? parsed : [parsed],
          );
          if (own.length === 0) return false;
        }
        return true;
      }),
    );
  });
});

describe('unpackRecords: the operation attribute and erase bodies (unit)', () => {
  /** A string body is sent as it is. @param {unknown} body @param {Record<string, string>} attributes */
  const withAttributes = (body, attributes) => ({
    ...makeRecord(body),
    messageAttributes: Object.fromEntries(
      Object.entries(attributes).map(([name, stringValue]) => [name, { stringValue }]),
    ),
  });
  /** @param {unknown} body  serialised as JSON, a string too */
  const erase = (body) => withAttributes(JSON.stringify(body), { operation: 'erase' });

  test('no operation attribute is an upsert, as is upsert; erase makes erasures; another value is poison for its message alone', () => {
    const plain = makeRecord(user('p'));
    const upsert = withAttributes(user('u'), { operation: 'upsert' });
    const erasure = erase('e@example.com');
    const unknowns = ['delete', 'ERASE', ''].map((value) =>
      withAttributes(user('x'), { operation: value }),
    );
    const { items, poisoned } = unpackRecords([plain, upsert, erasure, ...unknowns]);
    assert.deepEqual(
      items.map((i) => [i.messageId, i.operation]),
      [
        [plain.messageId, 'upsert'],
        [upsert.messageId, 'upsert'],
        [erasure.messageId, 'erase'],
      ],
    );
    assert.deepEqual(
      [...poisoned.keys()],
      unknowns.map((r) => r.messageId),
    );
    for (const failure of poisoned.values())
      assert.deepEqual(failure, {
        kind: 'poison',
        reason: 'the operation attribute must be upsert or erase',
      });
  });

  test('an erase body: an email, an object, or an array of either, in order; an email alone becomes {email}', () => {
    const one = erase('a@example.com');
    const object = erase({ email: 'b@example.com', changedAt: '2024-05-01T10:00:00Z' });
    const mixed = erase(['c@example.com', { email: 'd@example.com' }, 'E@Example.com']);
    const { items, poisoned } = unpackRecords([one, object, mixed]);
    assert.equal(poisoned.size, 0);
    assert.deepEqual(
      items.map((i) => [i.messageId, i.user]),
      [
        [one.messageId, { email: 'a@example.com' }],
        [object.messageId, { email: 'b@example.com', changedAt: '2024-05-01T10:00:00Z' }],
        [mixed.messageId, { email: 'c@example.com' }],
        [mixed.messageId, { email: 'd@example.com' }],
        [mixed.messageId, { email: 'E@Example.com' }],
      ],
    );
  });

  test("an erasure's fields are passed on as sent: checking them is the service's job", () => {
    const odd = { email: 'not-an-email', name: 'a user sent as an erasure' };
    assert.deepEqual(
      unpackRecords([erase([odd, {}])]).items.map((i) => i.user),
      [odd, {}],
    );
  });

  test("an erase message's resolution and invalid attributes say nothing: an erasure has no Prefer", () => {
    const record = withAttributes(['a@example.com'], {
      operation: 'erase',
      resolution: 'whatever',
      invalid: 'skip',
    });
    const { items, poisoned } = unpackRecords([record], 'merge', 'refuse');
    assert.equal(poisoned.size, 0);
    assert.deepEqual(
      items.map((i) => [i.operation, i.resolution, i.invalid]),
      [['erase', 'merge', 'refuse']],
    );
  });

  for (const [body, why] of /** @type {[unknown, string][]} */ ([
    [[], 'an empty array'],
    [null, 'null'],
    [42, 'a number'],
    [true, 'a boolean'],
    [['a@example.com', 5], 'an array with a number in it'],
    [['a@example.com', null], 'an array with null in it'],
    [[['a@example.com']], 'an array of arrays'],
  ])) {
    test(`an erase body of ${why}: that message is poison, and none of it is taken`, () => {
      const bad = erase(body);
      const good = erase('good@example.com');
      const { items, poisoned } = unpackRecords([bad, good]);
      assert.deepEqual(
        items.map((i) => i.messageId),
        [good.messageId],
      );
      assert.deepEqual(poisoned.get(bad.messageId), {
        kind: 'poison',
        reason:
          'an erase body must be an email, an {email, changedAt} object or a non-empty array of them',
      });
    });
  }

  test('an erase body that is not JSON (a bare email too) is poison: "not JSON"', () => {
    for (const body of ['a@example.com', '["a@example.com"', '']) {
      const bad = withAttributes(body, { operation: 'erase' });
      assert.deepEqual(unpackRecords([bad]).poisoned.get(bad.messageId), {
        kind: 'poison',
        reason: 'body is not JSON',
      });
    }
  });

  test('any batch of upserts and erasures: each message unpacked whole, as its operation, or poison', () => {
    const anyItem = fc.oneof(
      fc.emailAddress(),
      fc.dictionary(fc.string({ maxLength: 8 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
      fc.jsonValue({ maxDepth: 1 }),
    );
    const anyMessage = fc.record({
      operation: fc.constantFrom(undefined, 'upsert', 'erase'),
      body: fc.oneof(anyItem, fc.array(anyItem, { maxLength: 4 })),
    });
    fc.assert(
      fc.property(fc.array(anyMessage, { maxLength: 8 }), (messages) => {
        const records = messages.map(({ operation, body }) =>
          withAttributes(JSON.stringify(body), operation ? { operation } : {}),
        );
        const { items, poisoned } = unpackRecords(records);
        return records.every((record, m) => {
          const own = items.filter((i) => i.messageId === record.messageId);
          if (poisoned.has(record.messageId)) return own.length === 0;
          const { operation = 'upsert' } = messages[m];
          const parsed = JSON.parse(record.body);
          const sent = Array.isArray(parsed) ? parsed : [parsed];
          const posted = operation === 'erase' ? sent.map(erasureOf) : sent;
          assert.deepEqual(
            own.map((i) => [i.operation, i.user]),
            posted.map((p) => [operation, p]),
          );
          return own.length > 0;
        });
      }),
    );
  });
});

/** @param {unknown} sent */
const erasureOf = (sent) => (typeof sent === 'string' ? { email: sent } : sent);
