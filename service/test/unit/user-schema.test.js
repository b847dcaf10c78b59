import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { InvalidBatchError } from '../../src/errors.js';
import { parseUserBatch, userSchema } from '../../src/users/user-schema.js';
import { userRow } from '../../../test/support/user-rows.js';

describe('parseUserBatch (unit)', () => {
  test('rows come lower-cased, sorted by email, each email once (first wins), optional fields NULL', () => {
    const rows = parseUserBatch([
      { email: 'b@x.io', name: 'B' },
      { email: 'A@X.io', name: 'A1', phone: '+4412345678' },
      { email: 'a@x.io', name: 'A2' },
    ]);
    assert.deepEqual(rows, [
      userRow({ email: 'a@x.io', name: 'A1', phone: '+4412345678' }),
      userRow({ email: 'b@x.io', name: 'B' }),
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
      userRow({ email: 'a@x.io', name: 'A3', phone: '+4422222222', passwordHash: '$2b$12$first' }),
      userRow({ email: 'b@x.io', name: 'B' }),
    ]);
  });

  test('a passwordHash is a PHC / modular-crypt string and nothing else', () => {
    for (const good of [
      '$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA',
      '$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW',
      '$6$rounds=5000$salt$hash',
      '$y$j9T$F5Jx$abc',
    ]) {
      assert.equal(
        parseUserBatch([{ email: 'h@x.io', name: 'H', passwordHash: good }]).length,
        1,
        good,
      );
    }
    for (const bad of [
      '$argon2id$\u0000',
      '$2b$12$a\nb',
      "$2b$12$a'b",
      '$2b$12$a\\b',
      '$2b$12$a b',
      '$2b$12$é',
      'argon2id$x',
      '$$x',
    ]) {
      assert.throws(
        () => parseUserBatch([{ email: 'h@x.io', name: 'H', passwordHash: bad }]),
        InvalidBatchError,
        JSON.stringify(bad),
      );
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

  // Found by the fuzz test (seed 7): `X+@X+\.X+` backtracked over a domain of dots that was wrong
  // only at its end, in time quadratic in its length; 100,000 characters took 22 s.
  test('an email wrong only at its end is refused in time linear in its length', () => {
    for (const email of [
      `a@${'.'.repeat(100_000)} `,
      `a@${'a.'.repeat(50_000)}\u0000`,
      `a@${'İ.'.repeat(50_000)}@`,
      `${'a'.repeat(100_000)}@${'.'.repeat(100_000)}`,
    ]) {
      const started = performance.now();
      assert.throws(() => parseUserBatch([{ email, name: 'N' }]), InvalidBatchError);
      const ms = performance.now() - started;
      // Linear takes a few milliseconds here; the quadratic pattern took seconds.
      assert.ok(ms < 1000, `${email.length} characters took ${Math.round(ms)} ms`);
    }
  });

  test('the email pattern takes exactly the addresses `X+@X+\\.X+` took (X: no whitespace, @ or control)', () => {
    const X = '[^\\s@\\u0000-\\u001f\\u007f-\\u009f]';
    const before = new RegExp(`^${X}+@${X}+\\.${X}+$`, 'u');
    const now = new RegExp(userSchema.properties.email.pattern, 'u');
    const char = fc.constantFrom(
      'a',
      'Z',
      '.',
      '@',
      ' ',
      '\u0085',
      '\u0000',
      '\u2028',
      'İ',
      '😀',
      '-',
    );
    fc.assert(
      fc.property(fc.string({ unit: char, maxLength: 14 }), (s) =>
        assert.equal(now.test(s), before.test(s), JSON.stringify(s)),
      ),
      { numRuns: 20_000 },
    );
  });

  test('every problem of an item is reported, with its field', () => {
    assert.throws(
      () => parseUserBatch([{ email: 'x', name: '', extra: 1 }]),
      (/** @type {any} */ err) => {
        assert.ok(err instanceof InvalidBatchError);
        assert.deepEqual(err.errors.map((/** @type {any} */ e) => e.field).sort(), [
          'email',
          'extra',
          'name',
        ]);
        return true;
      },
    );
  });

  // Found by the fuzz test (seed 650694646): a lone surrogate in one field hid the email's
  // problem as stored, so the 400 named the name only.
  test('every field of an item is named: a lone surrogate in one does not hide the email too long once lower-cased', () => {
    const email = `İ${'a'.repeat(249)}@a.a`;
    assert.equal(email.length, 254);
    assert.throws(
      () => parseUserBatch([{ email, name: 'x\ud800' }]),
      (/** @type {any} */ err) => {
        assert.deepEqual(err.errors.map((/** @type {any} */ e) => e.field).sort(), [
          'email',
          'name',
        ]);
        assert.match(
          err.errors.find((/** @type {any} */ e) => e.field === 'email').message,
          /once lower-cased/,
        );
        return true;
      },
    );
  });

  test('arrays and numbers as items are refused as non-objects', () => {
    assert.throws(
      () => parseUserBatch([[], 5]),
      (/** @type {any} */ err) =>
        err.errors.length === 2 && err.errors.every((/** @type {any} */ e) => e.field === null),
    );
  });
});
