import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { ApiError, InvalidBatchError } from '../../src/errors.js';
import { parsePreferences } from '../../src/http/prefer.js';
import {
  DEFAULT_MAX_INVALID,
  Quarantine,
  REDACTED,
  keptJson,
  keptText,
  setAsideInvalid,
} from '../../src/users/quarantine.js';

const quarantine = (maxInvalid = DEFAULT_MAX_INVALID) =>
  new Quarantine({ client: 'crm', requestId: 'r-1', format: 'json', maxInvalid });

describe('Prefer: invalid=quarantine and what is set aside (unit)', () => {
  test('invalid=quarantine, its max-invalid parameter (default 100), announced in Preference-Applied; without it, nothing', () => {
    assert.deepEqual(parsePreferences('invalid=quarantine'), {
      resolution: 'ignore',
      return: undefined,
      count: false,
      invalid: { maxInvalid: DEFAULT_MAX_INVALID },
      applied: 'invalid=quarantine',
    });
    assert.deepEqual(
      parsePreferences('Invalid="quarantine"; Max-Invalid=5, resolution=merge-duplicates').invalid,
      { maxInvalid: 5 },
    );
    assert.equal(
      parsePreferences('resolution=merge-duplicates, invalid=quarantine;max-invalid=0').applied,
      'resolution=merge-duplicates, invalid=quarantine',
    );
    assert.equal(parsePreferences('return=minimal').invalid, undefined);
    assert.equal(
      parsePreferences('invalid=quarantine, handling=strict').applied,
      'handling=strict, invalid=quarantine',
      'honoured, so strict handling takes it',
    );
  });

  test('another value, parameter or bound is refused, naming what is taken', () => {
    for (const header of [
      'invalid=skip',
      'invalid=',
      'invalid=quarantine; max-invalid=10001',
      'invalid=quarantine; max-invalid=1.5',
      'invalid=quarantine; max-invalid',
      'invalid=quarantine; limit=3',
    ]) {
      assert.throws(
        () => parsePreferences(header),
        (/** @type {any} */ err) =>
          err instanceof ApiError &&
          err.code === 'unsupported_preference' &&
          /invalid=quarantine/.test(err.message),
        header,
      );
    }
  });

  test("a password's value, at any depth and in any case, never survives keptJson", () => {
    fc.assert(
      fc.property(
        fc.jsonValue(),
        fc.string({ minLength: 1 }),
        fc.constantFrom('password', 'Password', 'PASSWORD'),
        (value, secret, key) => {
          const marked = `§${secret}§`;
          const item = {
            email: 'a@b.co',
            nested: [{ [key]: marked }],
            [key]: marked,
            other: value,
          };
          const kept = keptJson(item, JSON.stringify(item));
          assert.ok(!kept.includes(marked), kept);
          assert.equal(JSON.parse(kept)[key], REDACTED);
        },
      ),
    );
    const plain = '{"email":"a@b.co", "name":"x"}';
    assert.equal(keptJson(JSON.parse(plain), plain), plain, 'an item without one is kept as sent');
  });

  test('in a text that is not JSON, the value after each "password" key is replaced, cut or not', () => {
    assert.equal(
      keptText('{"email":"a@b.co","password":"s3cr\\"et","name":"x"}'),
      '{"email":"a@b.co","password":"[redacted]","name":"x"}',
    );
    assert.equal(
      keptText('{"email":"a@b.co","Password" : "cut-off'),
      '{"email":"a@b.co","Password" : "[redacted]"',
    );
    assert.equal(keptText('{"password": 12345, "x": 1'), '{"password": "[redacted]", "x": 1');
    assert.equal(keptText('email,name'), 'email,name');
    fc.assert(
      fc.property(
        fc.string({ minLength: 1 }).filter((s) => !s.includes('"') && !s.includes('\\')),
        fc.string(),
        (secret, tail) => {
          const marked = `§${secret}§`;
          assert.ok(!keptText(`{"password":"${marked}${tail}`).includes(marked));
        },
      ),
    );
  });

  test("setAsideInvalid: valid rows in order, each invalid item kept with its position and all its problems; past the bound, today's refusal", () => {
    const q = quarantine(2);
    const rows = setAsideInvalid(
      [{ email: 'a@b.co', name: 'A' }, { email: 'x' }, 7, { email: 'c@d.co', name: 'C' }],
      q,
    );
    assert.deepEqual(
      rows.map((r) => r.email),
      ['a@b.co', 'c@d.co'],
    );
    assert.deepEqual(
      q.items.map((i) => [i.position, i.reason, i.item, i.errors.length]),
      [
        [1, 'invalid_user', '{"email":"x"}', 2],
        [2, 'invalid_user', '7', 1],
      ],
    );
    assert.deepEqual(q.byReason(), { invalid_user: 2 });
    assert.throws(
      () => setAsideInvalid([{ email: 'x' }, { email: 'y' }, { email: 'z' }], quarantine(2)),
      (/** @type {any} */ err) => {
        assert.ok(err instanceof InvalidBatchError);
        assert.match(err.message, /^3 of 3 users are invalid, more than the 2 /);
        assert.equal(err.errors.length, 6);
        return true;
      },
    );
  });
});
