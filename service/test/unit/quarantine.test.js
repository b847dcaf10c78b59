import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { ApiError, InvalidBatchError } from '../../src/errors.js';
import { parsePreferences } from '../../src/http/prefer.js';
import {
  MAX_KEPT_CHARS,
  REDACTED,
  keptCsv,
  keptErrors,
  keptJson,
  keptUnreadable,
} from '../../src/users/kept-item.js';
import {
  DEFAULT_MAX_INVALID,
  Quarantine,
  ScopeUsage,
  setAsideInvalid,
} from '../../src/users/quarantine.js';

const quarantine = (maxInvalid = DEFAULT_MAX_INVALID) =>
  new Quarantine({
    client: 'crm',
    scope: 'token:crm',
    requestId: 'r-1',
    format: 'json',
    maxInvalid,
    bound: { maxBytes: 1024 * 1024, usage: new ScopeUsage() },
  });
const HASH = '$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo';

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
          const { item: kept } = keptJson(item, JSON.stringify(item));
          assert.ok(!kept.includes(marked), kept);
          assert.equal(JSON.parse(kept)[key], REDACTED);
        },
      ),
    );
    const plain = '{"email":"a@b.co", "name":"x"}';
    assert.deepEqual(
      keptJson(JSON.parse(plain), plain),
      { item: plain, truncated: false },
      'an item without one is kept as sent',
    );
  });

  test('a password is found by the parsed keys, not the text: escaped, within a longer name, or a passwordHash that is no hash', () => {
    for (const [text, key] of [
      ['{"email":"a","p\\u0061ssword":"hunter2"}', 'password'],
      ['{"email":"a","\\u0050ASSWORD":"hunter2"}', 'PASSWORD'],
      ['{"email":"a","newPassword":"hunter2"}', 'newPassword'],
      ['{"email":"a","passwordHash":"hunter2"}', 'passwordHash'],
      ['{"email":"a","passwordHash":["hunter2"]}', 'passwordHash'],
    ]) {
      const { item } = keptJson(JSON.parse(text), text);
      assert.ok(!item.includes('hunter2'), item);
      assert.equal(JSON.parse(item)[key], REDACTED);
    }
    const hashed = `{"email":"a","passwordHash":"${HASH}"}`;
    assert.equal(keptJson(JSON.parse(hashed), hashed).item, hashed, 'a hash is kept');
  });

  test('a CSV record with a passwordHash that is no hash is written again, redacted; one without, kept as sent', () => {
    const columns = ['email', 'name', 'passwordHash'];
    const kept = keptCsv(
      { email: 'x', name: 'A "b", c', passwordHash: 'hunter2' },
      columns,
      'x,"A ""b"", c",hunter2',
    );
    assert.equal(kept.item, `"x","A ""b"", c","${REDACTED}"`);
    const sent = `x,A,${HASH}`;
    assert.equal(keptCsv({ email: 'x', name: 'A', passwordHash: HASH }, columns, sent).item, sent);
    assert.equal(
      keptCsv({ email: 'x', passwordHash: 'pw' }, columns, 'x,,pw').item,
      `"x",,"${REDACTED}"`,
    );
  });

  test('a record that did not parse keeps none of its text; what is kept is storable and bounded', () => {
    assert.deepEqual(keptUnreadable(7, '{"password":"hunter2"'), {
      item: '[not kept: line 7, 21 characters]',
      truncated: false,
    });
    const long = { email: 'x', name: 'n'.repeat(5_000_000) };
    const kept = keptJson(long);
    assert.equal(kept.item.length, MAX_KEPT_CHARS);
    assert.equal(kept.truncated, true);
    assert.equal(keptCsv({ email: 'a\0b' }, ['email'], 'a\0b').item, 'a\uFFFDb');
    const errors = keptErrors([{ index: 0, field: `x\0\ud800${'f'.repeat(1000)}`, message: 'm' }]);
    assert.ok(!errors.includes('\\u0000') && !errors.includes('\\ud800'), errors);
    assert.ok(errors.length < 400, 'a field name is cut');
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
