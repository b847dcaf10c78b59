import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { operationOf, rowCountOf } from '../../src/tracing/pg-spans.js';

test("a statement's operation is its first keyword, after the group's SET LOCAL", () => {
  assert.equal(operationOf("INSERT INTO users VALUES ('a@b.co')"), 'INSERT');
  assert.equal(operationOf("SET LOCAL lock_timeout = 250; INSERT INTO users VALUES ('a@b.co')"), 'INSERT');
  assert.equal(operationOf("SET LOCAL lock_timeout = 250; SELECT now(); INSERT INTO users VALUES ('a@b.co') RETURNING email"), 'INSERT', 'the now() before a write that returns its rows');
  assert.equal(operationOf('copy users_staging FROM STDIN'), 'COPY');
  assert.equal(operationOf(''), undefined);
});

test('nothing of a statement past its keyword reaches the operation, whatever the values hold', () => {
  fc.assert(fc.property(fc.string(), (value) => {
    const op = operationOf(`SET LOCAL lock_timeout = 250; INSERT INTO users VALUES (${JSON.stringify(value)})`);
    assert.equal(op, 'INSERT');
  }));
});

test('the row count is the last statement\'s when a query held several', () => {
  assert.equal(rowCountOf({ rowCount: 3 }), 3);
  assert.equal(rowCountOf([{ rowCount: null }, { rowCount: 7 }]), 7);
  assert.equal(rowCountOf(undefined), undefined);
});
