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
    assert.deepEqual(items, [
      { messageId: single.messageId, user: user('a'), resolution: 'ignore', invalid: 'quarantine' },
      { messageId: many.messageId, user: user('b'), resolution: 'ignore', invalid: 'quarantine' },
      { messageId: many.messageId, user: user('c'), resolution: 'ignore', invalid: 'quarantine' },
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
