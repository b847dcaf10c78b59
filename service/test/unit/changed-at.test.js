// changedAt: RFC 3339 with an offset, to the microsecond, checked by the one schema;
// instants ordered to the microsecond; an email's items in one request folded by newest change.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { compareChanges, isRealDateTime } from '../../src/users/changed-at.js';
import { checkUser, oncePerEmail } from '../../src/users/user-schema.js';
import { userRow } from '../../../test/support/user-rows.js';

/** @param {number} n @param {number} width */
const pad = (n, width = 2) => String(n).padStart(width, '0');
/** Days in a month, by a Date (apart from the validator's own reckoning). @param {number} year @param {number} month  1-12 */
function daysIn(year, month) {
  const d = new Date(0);
  d.setUTCFullYear(year, month, 0); // day 0 of the next month: the last of this one
  return d.getUTCDate();
}

/** The field's problem, or null when the item passes. @param {unknown} changedAt */
function problem(changedAt) {
  const checked = checkUser({ email: 'a@x.io', name: 'A', changedAt }, 0);
  if (!Array.isArray(checked)) return null;
  const errors = /** @type {{ field: string, message: string }[]} */ (checked);
  assert.deepEqual(
    errors.map((e) => e.field),
    ['changedAt'],
  );
  return errors[0].message;
}

const offset = fc.oneof(
  fc.constant('Z'),
  fc
    .tuple(
      fc.constantFrom('+', '-'),
      fc.integer({ min: 0, max: 15 }),
      fc.integer({ min: 0, max: 59 }),
    )
    .map(([sign, h, m]) => `${sign}${pad(h)}:${pad(m)}`),
);
/** A date-time that exists, its parts, and how it is written. */
const dateTime = fc
  .record({
    year: fc.integer({ min: 1, max: 9999 }),
    month: fc.integer({ min: 1, max: 12 }),
    dayAt: fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
    hour: fc.integer({ min: 0, max: 23 }),
    minute: fc.integer({ min: 0, max: 59 }),
    second: fc.integer({ min: 0, max: 59 }),
    fraction: fc.string({ unit: fc.constantFrom(...'0123456789'), maxLength: 6 }),
    offset,
  })
  .map((p) => {
    const day = 1 + Math.floor(p.dayAt * daysIn(p.year, p.month));
    const text = `${pad(p.year, 4)}-${pad(p.month)}-${pad(day)}T${pad(p.hour)}:${pad(p.minute)}:${pad(p.second)}${p.fraction ? `.${p.fraction}` : ''}${p.offset}`;
    return { ...p, day, text };
  });

describe('changedAt validation (unit)', () => {
  test('every date and time that exists, in any offset PostgreSQL takes, with 0 to 6 fractional digits, passes and is kept as sent', () => {
    fc.assert(
      fc.property(dateTime, ({ text }) => {
        const row = /** @type {import('../../src/users/user-schema.js').UserRow} */ (
          checkUser({ email: 'a@x.io', name: 'A', changedAt: text }, 0)
        );
        assert.equal(row.changedAt, text);
      }),
      { numRuns: 2000 },
    );
  });

  test('a day the month does not have is refused: 29 February only in leap years (every 4th, not every 100th, every 400th)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 9999 }),
        fc.integer({ min: 1, max: 12 }),
        (year, month) => {
          const last = daysIn(year, month);
          assert.equal(problem(`${pad(year, 4)}-${pad(month)}-${pad(last)}T00:00:00Z`), null);
          if (last < 31)
            assert.match(
              /** @type {string} */ (
                problem(`${pad(year, 4)}-${pad(month)}-${pad(last + 1)}T00:00:00Z`)
              ),
              /must be a date and time that exist/,
            );
        },
      ),
    );
    for (const [date, ok] of [
      ['2024-02-29', true],
      ['2000-02-29', true],
      ['1900-02-29', false],
      ['2100-02-29', false],
      ['2025-02-29', false],
      ['2026-04-31', false],
      ['2026-00-01', false],
      ['2026-13-01', false],
      ['2026-01-00', false],
      ['0000-01-01', false],
    ]) {
      assert.equal(isRealDateTime(`${date}T00:00:00Z`), ok, `${date}`);
    }
  });

  test('hours, minutes, seconds and offsets out of range are refused; a leap second too (PostgreSQL would roll it over)', () => {
    for (const text of [
      '2026-11-26T24:00:00Z',
      '2026-11-26T10:60:00Z',
      '2016-12-31T23:59:60Z',
      '2026-11-26T10:00:00+16:00',
      '2026-11-26T10:00:00-23:59',
      '2026-11-26T10:00:00+01:60',
    ]) {
      assert.match(
        /** @type {string} */ (problem(text)),
        /must be a date and time that exist/,
        text,
      );
    }
    assert.equal(problem('2026-11-26T10:00:00-15:59'), null);
  });

  test('a seventh fractional digit is refused, not rounded: it could not be stored as sent', () => {
    fc.assert(
      fc.property(
        dateTime,
        fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: 7, maxLength: 30 }),
        ({ text }, digits) => {
          const tooPrecise = text.replace(/(\.\d*)?(Z|[+-]\d\d:\d\d)$/, `.${digits}$2`);
          assert.match(
            /** @type {string} */ (problem(tooPrecise)),
            /more than 6 fractional digits/,
          );
        },
      ),
    );
  });

  test('anything else is refused, naming the field and the format', () => {
    for (const text of [
      '2026-11-26T10:00:00',
      '2026-11-26 10:00:00Z',
      '2026-11-26t10:00:00z',
      '2026-11-26T10:00Z',
      '2026-11-26',
      '2026-11-26T10:00:00.Z',
      '+02026-11-26T10:00:00Z',
      '2026-11-26T10:00:00+0100',
      'now',
      '',
      ' 2026-11-26T10:00:00Z',
      '2026-11-26T10:00:00Z\n',
    ]) {
      assert.match(
        /** @type {string} */ (problem(text)),
        /must be an RFC 3339 date-time with an offset/,
        JSON.stringify(text),
      );
    }
    for (const value of [1764150000, null, true, {}, []])
      assert.equal(problem(value), 'must be a string');
  });
});

describe('compareChanges (unit)', () => {
  test('orders by the instant named, whatever the offset, to the microsecond', () => {
    fc.assert(
      fc.property(dateTime, dateTime, (a, b) => {
        /** The instant in microseconds, as a BigInt (beyond 2^53). @param {typeof a} p */
        const micros = (p) => {
          const sign = p.offset === 'Z' ? 0 : p.offset[0] === '+' ? 1 : -1;
          const offsetMinutes =
            sign * (Number(p.offset.slice(1, 3)) * 60 + Number(p.offset.slice(4, 6)));
          const d = new Date(0);
          d.setUTCFullYear(p.year, p.month - 1, p.day);
          d.setUTCHours(p.hour, p.minute - offsetMinutes, p.second);
          return BigInt(d.getTime()) * 1000n + BigInt(p.fraction.padEnd(6, '0'));
        };
        const expected = micros(a) < micros(b) ? -1 : micros(a) > micros(b) ? 1 : 0;
        assert.equal(Math.sign(compareChanges(a.text, b.text)), expected, `${a.text} vs ${b.text}`);
      }),
      { numRuns: 2000 },
    );
    assert.equal(compareChanges('2026-11-26T11:00:00+01:00', '2026-11-26T10:00:00.000000Z'), 0);
    assert.ok(
      compareChanges('9999-12-31T23:59:59.999998Z', '9999-12-31T23:59:59.999999Z') < 0,
      'a microsecond apart, even past 2^53 µs',
    );
    assert.ok(compareChanges(null, '0001-01-01T00:00:00Z') < 0, 'none is older than any');
    assert.equal(compareChanges(null, null), 0);
  });
});

describe("merge mode folds an email's items by newest change (unit)", () => {
  test('whatever the order sent, the newest change wins; a tie goes to the later line; items without changedAt are oldest', () => {
    const item = fc.record({
      name: fc.constantFrom('a', 'b', 'c', 'd'),
      at: fc.option(fc.integer({ min: 0, max: 3 }), { nil: null }),
    });
    fc.assert(
      fc.property(fc.array(item, { minLength: 1, maxLength: 12 }), (items) => {
        const rows = items.map((it) =>
          userRow({
            email: 'e@x.io',
            name: it.name,
            changedAt: it.at === null ? null : `2026-11-26T10:00:0${it.at}Z`,
          }),
        );
        const [folded] = oncePerEmail(rows.slice(), 'merge');
        // The last of the items whose change is the newest (no value: older than any).
        const key = (/** @type {number | null} */ at) => (at === null ? -1 : at);
        const newest = Math.max(...items.map((it) => key(it.at)));
        const winner = items.findLast((it) => key(it.at) === newest);
        assert.deepEqual(
          [folded.name, folded.changedAt],
          [winner?.name, winner?.at === null ? null : `2026-11-26T10:00:0${winner?.at}Z`],
        );
      }),
    );
  });

  test('the newest change takes a phone and hash from an older change where it has none; ignore mode keeps the first item', () => {
    const rows = [
      userRow({ email: 'e@x.io', name: 'new', changedAt: '2026-11-26T12:00:00Z' }),
      userRow({
        email: 'e@x.io',
        name: 'old',
        phone: '+4411111111',
        passwordHash: '$2b$12$old',
        changedAt: '2026-11-26T10:00:00Z',
      }),
      userRow({
        email: 'e@x.io',
        name: 'middle',
        phone: '+4422222222',
        changedAt: '2026-11-26T11:00:00Z',
      }),
    ];
    const copy = () => rows.map((r) => ({ ...r }));
    assert.deepEqual(oncePerEmail(copy(), 'merge'), [
      userRow({
        email: 'e@x.io',
        name: 'new',
        phone: '+4422222222',
        passwordHash: '$2b$12$old',
        changedAt: '2026-11-26T12:00:00Z',
      }),
    ]);
    assert.deepEqual(oncePerEmail(copy(), 'ignore'), [rows[0]]);
  });
});
