import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createTransactionSettings, lastResult } from '../../src/db/transaction-settings.js';

const settings = createTransactionSettings({ statementTimeoutMs: 30_000, lockTimeoutMs: 3000 });

test('a statement carries the time limits before it, in the same query: one implicit transaction', () => {
  assert.equal(
    settings.statement('INSERT INTO users SELECT 1'),
    'SET LOCAL statement_timeout = 30000; SET LOCAL lock_timeout = 3000; INSERT INTO users SELECT 1',
  );
  assert.equal(
    settings.statement('INSERT 1', { lockTimeoutMs: 250 }),
    'SET LOCAL statement_timeout = 30000; SET LOCAL lock_timeout = 250; INSERT 1',
    "a group's own lock timeout",
  );
});

test('an explicit transaction sets them in the round trip of its BEGIN, with the statements it asks for', () => {
  assert.equal(
    settings.begin(),
    'BEGIN; SET LOCAL statement_timeout = 30000; SET LOCAL lock_timeout = 3000; ',
  );
  assert.equal(
    settings.begin({ statementTimeoutMs: 0 }, 'CREATE TEMPORARY TABLE t (x int) ON COMMIT DROP'),
    'BEGIN; SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 3000; CREATE TEMPORARY TABLE t (x int) ON COMMIT DROP',
    'a streamed import: no statement timeout, its staging table',
  );
});

test('a limit left unset is not set; a fraction of a millisecond is dropped, a negative one is none', () => {
  assert.equal(
    createTransactionSettings({ statementTimeoutMs: 500 }).statement('SELECT 1'),
    'SET LOCAL statement_timeout = 500; SELECT 1',
  );
  assert.equal(
    settings.statement('SELECT 1', { statementTimeoutMs: 12.7, lockTimeoutMs: -1 }),
    'SET LOCAL statement_timeout = 12; SET LOCAL lock_timeout = 0; SELECT 1',
  );
  assert.deepEqual(settings.defaults, { statementTimeoutMs: 30_000, lockTimeoutMs: 3000 });
});

test("a query's answer is its last statement's", () => {
  const only = /** @type {any} */ ({ rowCount: 1 });
  assert.equal(lastResult(only), only);
  assert.equal(
    lastResult(/** @type {any} */ ([{ command: 'SET' }, { command: 'SET' }, only])),
    only,
  );
});
