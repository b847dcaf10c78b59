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

  test('merge mode: an email sent twice is written once, as if applied in order (the later name; its phone and hash where it has them)', () => {
    const rows = parseUserBatch(
      [
        { email: 'a@x.io', name: 'A1', phone: '+4411111111', passwordHash: '$2b$12$first' },
        { email: 'b@x.io', name: 'B' },
        { email: 'A@x.io', name: 'A2', phone: '+4422222222' },
        { email: 'a@X.io', name: 'A3' },
      ],
      'merge',
    );
    assert.deepEqual(rows, [
      ['a@x.io', 'A3', '+4422222222', '$2b$12$first'],
      ['b@x.io', 'B', null, null],
    ]);
  });

  test('a passwordHash is a PHC / modular-crypt string and nothing else', () => {
    for (const good of ['$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA', '$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW', '$6$rounds=5000$salt$hash', '$y$j9T$F5Jx$abc']) {
      assert.equal(parseUserBatch([{ email: 'h@x.io', name: 'H', passwordHash: good }]).length, 1, good);
    }
    for (const bad of ['$argon2id$\u0000', '$2b$12$a\nb', "$2b$12$a'b", '$2b$12$a\\b', '$2b$12$a b', '$2b$12$é', 'argon2id$x', '$$x']) {
      assert.throws(() => parseUserBatch([{ email: 'h@x.io', name: 'H', passwordHash: bad }]), InvalidBatchError, JSON.stringify(bad));
    }
  });

  test('an email with a C1 control character is refused, as a name with one is', () => {
    assert.throws(() => parseUserBatch([{ email: 'a\u0085b@x.io', name: 'C' }]), InvalidBatchError);
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
