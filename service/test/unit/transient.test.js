import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { timeoutOf } from '../../src/db/database.js';
import { classifyFailure } from '../../src/db/failure.js';
import { Lending } from '../../src/db/lending.js';
import { WatchdogCutError } from '../../src/db/watchdog.js';

/** Whether db/failure.js calls `err` passing. @param {unknown} err */
const isTransient = (err) => classifyFailure(err).transient;

/** The failure of a statement on `lending`, as the lending hands it on. @param {Lending} lending */
const failureOn = async (lending) =>
  lending.handOn(await lending.query('SELECT 1').catch((e) => e));

/** @param {string} code */
const serverError = (code) =>
  Object.assign(new pg.DatabaseError('from the server', 0, 'error'), { code });

test('a passing failure is told by its class, its errno or its SQLSTATE, never by its message', async () => {
  assert.equal(isTransient(new WatchdogCutError()), true, "the watchdog's cut");
  assert.equal(
    isTransient(new Error('database unreachable: connection cut by the watchdog')),
    false,
    'the same words, not the cut',
  );
  for (const code of [
    'ECONNRESET',
    'ECONNREFUSED',
    'EAI_AGAIN',
    '08006',
    '53300',
    '57P01',
    '57014',
    '40001',
    '40P01',
  ])
    assert.equal(isTransient(serverError(code)), true, code);
  for (const code of ['23505', '22021', 'XX000', '42P01'])
    assert.equal(isTransient(serverError(code)), false, code);
  assert.equal(
    isTransient(new Error('Connection terminated unexpectedly')),
    false,
    'a message alone',
  );
});

test("pg's own failure is the connection's when the lending saw its socket gone, or the statement unanswered its read timeout", async () => {
  const failing = {
    query: async () => Promise.reject(new Error('Connection terminated unexpectedly')),
  };
  const gone = new Lending(failing, { socket: { destroyed: true } });
  assert.equal(isTransient(await failureOn(gone)), true, 'socket gone');
  const alive = new Lending(failing, { socket: { destroyed: false } });
  assert.equal(isTransient(await failureOn(alive)), false, 'socket alive, answered at once');
  const slow = {
    query: () =>
      new Promise((_, reject) => setTimeout(() => reject(new Error('Query read timeout')), 30)),
  };
  const timedOut = new Lending(slow, { socket: { destroyed: false }, readTimeoutMs: 20 });
  assert.equal(isTransient(await failureOn(timedOut)), true, 'unanswered its read timeout');
});

test("pg's own failure of a statement sent after the client emitted a connection error is the connection's, though its socket is still open", async () => {
  const failing = {
    query: async () =>
      Promise.reject(new Error('Client has encountered a connection error and is not queryable')),
  };
  const lent = new Lending(failing, { socket: { destroyed: false } });
  lent.connectionFailed(
    Object.assign(
      new pg.DatabaseError(
        'terminating connection because of crash of another server process',
        0,
        'error',
      ),
      { code: '57P02', severity: 'FATAL' },
    ),
  );
  assert.equal(isTransient(await failureOn(lent)), true);
  const alone = new Lending(failing, { socket: { destroyed: false } });
  assert.equal(
    isTransient(await failureOn(alone)),
    false,
    "no connection error while lent: not the connection's",
  );
});

test('a cancellation is statement_timeout once the timeout in force ran out, never by its message; an earlier one is not', async () => {
  const cancelled = () => serverError('57014');
  const after = (/** @type {number} */ ms) => ({
    query: () => new Promise((_, reject) => setTimeout(() => reject(cancelled()), ms)),
  });
  const late = new Lending(after(30), { socket: { destroyed: false }, statementTimeoutMs: 20 });
  assert.equal(timeoutOf(await failureOn(late)), 'statement_timeout');
  const early = new Lending(after(0), { socket: { destroyed: false }, statementTimeoutMs: 1000 });
  assert.equal(
    timeoutOf(await failureOn(early)),
    undefined,
    "an operator's cancel, or a trigger's",
  );
  const beginsThenCancelled = {
    query: (/** @type {any} */ q) =>
      q.operation === 'BEGIN' ? Promise.resolve({}) : after(30).query(),
  };
  const none = new Lending(beginsThenCancelled, {
    socket: { destroyed: false },
    statementTimeoutMs: 20,
  });
  await none.begin('BEGIN', 0);
  assert.equal(
    timeoutOf(await failureOn(none)),
    undefined,
    'a transaction without a statement timeout',
  );
  const worded = Object.assign(new Error('canceling statement due to statement timeout'), {
    code: '57014',
  });
  assert.equal(timeoutOf(worded), undefined, 'the words alone decide nothing');
  assert.equal(timeoutOf(serverError('55P03')), 'lock_timeout');
});
