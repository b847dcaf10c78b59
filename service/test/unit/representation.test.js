import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { READ_COLUMNS } from '../../src/http/write-query.js';
import { representation as representationText } from '../../src/http/representation.js';
import { decodeWrittenUsers as writtenUsers, timestampAsJson } from '../../src/users/user-sql.js';
import { userRow } from '../../../test/support/user-rows.js';

/** @param {string} email @param {boolean} inserted */
const written = (email, inserted) => ({
  email,
  name: `name of ${email}`,
  phone: null,
  createdAt: '2026-01-01T00:00:00+00:00',
  updatedAt: inserted ? null : '2026-01-02T00:00:00+00:00',
});
/** @param {string[]} emails @param {import('../../src/users/user-writer.js').WrittenUser[]} users @param {Parameters<typeof representationText>[2]} select */
const representation = (emails, users, select) =>
  JSON.parse(representationText(emails, users, select));

describe('a representation from the rows written (unit)', () => {
  test('the rows written, in the order their emails were first sent, each once, with the columns selected; the rest left out', () => {
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom('a', 'b', 'c', 'd', 'e'), { minLength: 1, maxLength: 12 }),
        fc.func(fc.constantFrom('inserted', 'updated', 'skipped')),
        (order, fate) => {
          const users = [...new Set(order)]
            .sort()
            .filter((e) => fate(e) !== 'skipped')
            .map((e) => written(e, fate(e) === 'inserted'));
          const rows = representation(order, users, READ_COLUMNS);
          const expected = [...new Set(order)].filter((e) => fate(e) !== 'skipped');
          assert.deepEqual(
            rows.map((r) => r.email),
            expected,
          );
          for (const r of rows) assert.deepEqual(Object.keys(r), [...READ_COLUMNS]);
          const report = representation(order, users, ['email', 'outcome']);
          assert.equal(report.length, order.length, 'the report: one entry an item');
          for (const [i, r] of report.entries()) {
            assert.equal(r.email, order[i]);
            assert.equal(r.outcome, order.indexOf(order[i]) < i ? 'repeated' : fate(order[i]));
          }
        },
      ),
    );
  });

  test('with every column selected in order, the rows as pg gave them; any other selection, those columns in that order', () => {
    const users = [written('b', true), written('a', false)];
    assert.equal(
      representationText(['a', 'b'], users, READ_COLUMNS),
      JSON.stringify([users[1], users[0]]),
    );
    assert.equal(
      representationText(['a', 'b'], users, ['updatedAt', 'email']),
      '[{"updatedAt":"2026-01-02T00:00:00+00:00","email":"a"},{"updatedAt":null,"email":"b"}]',
    );
    assert.equal(representationText(['c'], users, READ_COLUMNS), '[]');
  });

  test('the rows as written, found by email, in the order sent (whatever transaction wrote them)', () => {
    const inserted = [written('a', true), written('b', true), written('c', true)];
    assert.equal(
      representationText(['c', 'a', 'b'], inserted, READ_COLUMNS),
      JSON.stringify([inserted[2], inserted[0], inserted[1]]),
    );
    // Two transactions' rows (two createdAt): each row as written, found by its email.
    const twice = [
      inserted[0],
      { ...inserted[1], createdAt: '2026-01-03T00:00:00+00:00', name: 'as stored' },
    ];
    assert.deepEqual(representation(['b', 'a'], twice, READ_COLUMNS), [twice[1], twice[0]]);
  });

  test('the rows built from what the statement returned have READ_COLUMNS as keys, in their order (what serialising them as they come relies on)', () => {
    const users = writtenUsers(
      [userRow({ email: 'a@x.io', name: 'A', phone: '+15550100100' })],
      [result('SELECT', [['2026-11-25 04:15:04.5+00']]), result('INSERT', [['a@x.io']])],
      'skip',
    );
    assert.deepEqual(Object.keys(users[0]), [...READ_COLUMNS]);
    const merged = writtenUsers(
      [userRow({ email: 'a@x.io', name: 'A' })],
      result('INSERT', [
        ['a@x.io', '2026-11-25 04:15:04.5+00', '+15550100100', '2026-11-26 00:00:00+00'],
      ]),
      'merge',
    );
    assert.deepEqual(Object.keys(merged[0]), [...READ_COLUMNS]);
  });

  test('a column selected that a skipped item has no value for is null', () => {
    assert.deepEqual(representation(['a'], [], ['email', 'name', 'outcome']), [
      { email: 'a', name: null, outcome: 'skipped' },
    ]);
  });
});

/** A pg result as the writer gets it. @param {string} command @param {unknown[][]} rows @returns {any} */
const result = (command, rows) => ({ command, rows, rowCount: rows.length, oid: 0, fields: [] });

describe('the rows written, from what the statement returned (unit)', () => {
  const CREATED = '2026-11-25 04:15:04.123456+00';
  test('sent rows and returned ones matched in either order: the sent name and phone, the stored timestamps (and phone, in merge mode)', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.emailAddress(), { minLength: 1, maxLength: 20 }),
        fc.func(fc.boolean()),
        fc.boolean(),
        fc.constantFrom('skip', 'merge'),
        (emails, written, shuffled, onConflict) => {
          const sent = emails.sort().map((e, i) =>
            userRow({
              email: e,
              name: `name ${i}`,
              phone: i % 2 ? null : `+1555010010${i % 10}`,
            }),
          );
          const merge = onConflict === 'merge';
          const returned = sent
            .filter((r) => written(r.email))
            .map((r) =>
              merge
                ? [r.email, CREATED, '+15550100999', r.phone ? null : '2026-11-26 00:00:00+01']
                : [r.email],
            );
          if (shuffled) returned.reverse();
          // As pg answers a simple query: one result a statement (the lock timeout's, now()'s, the write's).
          const results = merge
            ? result('INSERT', returned)
            : [result('SET', []), result('SELECT', [[CREATED]]), result('INSERT', returned)];
          const users = writtenUsers(
            sent,
            /** @type {any} */ (results),
            /** @type {'skip' | 'merge'} */ (onConflict),
          );
          const expected = sent.filter((r) => written(r.email));
          assert.deepEqual(
            users.map((u) => u.email),
            expected.map((r) => r.email),
            'in the order sent',
          );
          for (const [i, u] of users.entries()) {
            assert.equal(u.name, expected[i].name);
            assert.equal(u.phone, merge ? '+15550100999' : expected[i].phone);
            assert.equal(u.createdAt, '2026-11-25T04:15:04.123456+00:00');
            assert.equal(
              u.updatedAt,
              merge && !expected[i].phone ? '2026-11-26T00:00:00+01:00' : null,
            );
          }
        },
      ),
    );
  });

  test("a timestamptz in PostgreSQL's ISO text, as to_json writes it; anything else as it came", () => {
    fc.assert(
      fc.property(
        fc.date({
          min: new Date('0001-01-01T00:00:00Z'),
          max: new Date('9999-12-31T23:59:59Z'),
          noInvalidDate: true,
        }),
        fc.option(fc.integer({ min: 1, max: 999_999 }), { nil: undefined }),
        fc.constantFrom('+00', '-05', '+05:30', '+14', '-03:30', '+05:53:28'),
        (date, micros, offset) => {
          const [day, time] = date.toISOString().slice(0, 19).split('T');
          const fraction =
            micros === undefined ? '' : `.${String(micros).padStart(6, '0').replace(/0+$/, '')}`;
          const json = timestampAsJson(`${day} ${time}${fraction}${offset}`);
          assert.equal(
            json,
            `${day}T${time}${fraction}${offset.length === 3 ? `${offset}:00` : offset}`,
          );
        },
      ),
    );
    for (const other of [
      'infinity',
      '-infinity',
      '2026-11-25 04:15:04+00 BC',
      '25.11.2026 04:15:04 UTC',
    ])
      assert.equal(timestampAsJson(other), other);
  });
});
