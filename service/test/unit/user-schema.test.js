import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidBatchError } from '../../src/errors.js';
import { parseUserBatch } from '../../src/users/user-schema.js';

describe('parseUserBatch (unit)', () => {
  test('rows come lower-cased, sorted by email, each email once (first wins), optional fields NULL', () => {
    const rows = parseUserBatch([
      { email: 'b@x.io', name: 'B' },
      { email: 'A@X.io', name: 'A1', phone: '+4412345678' },
      { email: 'a@x.io', name: 'A2' },
    ]);
    assert.deepEqual(rows, [
      ['a@x.io', 'A1', '+4412345678', null],
      ['b@x.io', 'B', null, null],
    ]);
  });

  test('a 254-character email and a 200-character name pass; emoji count as one character', () => {
    const email = `${'a'.repeat(242)}@example.com`;
    assert.equal(email.length, 254);
    assert.equal(parseUserBatch([{ email, name: '😀'.repeat(200) }]).length, 1);
  });

  test('every problem of an item is reported, with its field', () => {
    assert.throws(
      () => parseUserBatch([{ email: 'x', name: '', extra: 1 }]),
      (/** @type {any} */ err) => {
        assert.ok(err instanceof InvalidBatchError);
        assert.deepEqual(err.errors.map((/** @type {any} */ e) => e.field).sort(), ['email', 'extra', 'name']);
        return true;
      },
    );
  });

  test('arrays and numbers as items are refused as non-objects', () => {
    assert.throws(() => parseUserBatch([[], 5]), (/** @type {any} */ err) => err.errors.length === 2 && err.errors.every((/** @type {any} */ e) => e.field === null));
  });
});
