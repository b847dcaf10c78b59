import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { READ_COLUMNS } from '../../src/http/write-query.js';
import { representation } from '../../src/users/post-users.js';

/** @param {string} email @param {boolean} inserted */
const written = (email, inserted) => ({ email, name: `name of ${email}`, phone: null, createdAt: '2026-01-01T00:00:00+00:00', updatedAt: inserted ? null : '2026-01-02T00:00:00+00:00', inserted });

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

  test('a column selected that a skipped item has no value for is null', () => {
    assert.deepEqual(representation(['a'], [], ['email', 'name', 'outcome']), [{ email: 'a', name: null, outcome: 'skipped' }]);
  });
});
