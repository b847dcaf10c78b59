import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { READ_COLUMNS } from '../../src/http/write-query.js';
import { representation as representationText } from '../../src/users/representation.js';
import { writeStatement } from '../../src/users/user-sql.js';

/** @param {string} email @param {boolean} inserted */
const written = (email, inserted) => ({ email, name: `name of ${email}`, phone: null, createdAt: '2026-01-01T00:00:00+00:00', updatedAt: inserted ? null : '2026-01-02T00:00:00+00:00' });
/** @param {Parameters<typeof representationText>} args @returns {Record<string, unknown>[]} */
const representation = (...args) => JSON.parse(representationText(...args));

describe('a representation from the rows written (unit)', () => {
  test('the rows written, in the order their emails were first sent, each once, with the columns selected; the rest left out', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom('a', 'b', 'c', 'd', 'e'), { minLength: 1, maxLength: 12 }), fc.func(fc.constantFrom('inserted', 'updated', 'skipped')), (order, fate) => {
        const users = [...new Set(order)].sort().filter((e) => fate(e) !== 'skipped').map((e) => written(e, fate(e) === 'inserted'));
        const rows = representation(order, users, READ_COLUMNS);
        const expected = [...new Set(order)].filter((e) => fate(e) !== 'skipped');
        assert.deepEqual(rows.map((r) => r.email), expected);
        for (const r of rows) assert.deepEqual(Object.keys(r), [...READ_COLUMNS]);
        const report = representation(order, users, ['email', 'outcome']);
        assert.equal(report.length, order.length, 'the report: one entry an item');
        for (const [i, r] of report.entries()) {
          assert.equal(r.email, order[i]);
          assert.equal(r.outcome, order.indexOf(order[i]) < i ? 'repeated' : fate(order[i]));
        }
      }),
    );
  });

  test('with every column selected in order, the rows as pg gave them; any other selection, those columns in that order', () => {
    const users = [written('b', true), written('a', false)];
    assert.equal(representationText(['a', 'b'], users, READ_COLUMNS), JSON.stringify([users[1], users[0]]));
    assert.equal(representationText(['a', 'b'], users, ['updatedAt', 'email']), '[{"updatedAt":"2026-01-02T00:00:00+00:00","email":"a"},{"updatedAt":null,"email":"b"}]');
    assert.equal(representationText(['c'], users, READ_COLUMNS), '[]');
  });

  test("the statement returns READ_COLUMNS, in their order (what serialising pg's rows as they come relies on)", () => {
    const sql = writeStatement('SELECT 1', 'skip', 'rows');
    const list = /RETURNING (.*)$/s.exec(sql)?.[1];
    assert.ok(list, sql);
    assert.deepEqual(list.split(/,(?![^(]*\))/).map((c) => /AS "(\w+)"$/.exec(c.trim())?.[1] ?? c.trim()), [...READ_COLUMNS]);
  });

  test('a column selected that a skipped item has no value for is null', () => {
    assert.deepEqual(representation(['a'], [], ['email', 'name', 'outcome']), [{ email: 'a', name: null, outcome: 'skipped' }]);
  });
});
