import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { classifyFailure } from '../../src/db/failure.js';
import { Lending } from '../../src/db/lending.js';
import {
  DatabaseTimeoutError,
  DatabaseUnavailableError,
  OutcomeUnknownError,
} from '../../src/errors.js';
import { createGroupCommit } from '../../src/users/group-commit.js';
import { createTransactionSettings } from '../../src/db/transaction-settings.js';
import { createUserWriter } from '../../src/users/user-writer.js';
import { createWritePolicy, refusalOfDatabaseState } from '../../src/users/write-policy.js';
import { part, userRow } from '../../../test/support/user-rows.js';

const lost = () =>
  Object.assign(new Error('Connection terminated unexpectedly'), { code: undefined });
/** PostgreSQL's own error, as pg hands it on. @param {string} code @param {string} [severity] */
const serverError = (code, severity = 'ERROR') =>
  Object.assign(new pg.DatabaseError('from the server', 0, 'error'), { code, severity });

/**
 * A pooled connection lent as database.js lends it: each statement answered by `answer` (resolves,
 * or throws the failure it returns).
 * @param {(text: string) => Error | undefined} answer
 */
function fakeConnection(answer) {
  /** @type {string[]} */
  const sent = [];
  const client = /** @type {any} */ ({
    query: async (/** @type {string | { text: string }} */ q) => {
      const text = typeof q === 'string' ? q : q.text;
      sent.push(text);
      const failure = answer(text);
      if (failure) throw failure;
      return { rows: [], rowCount: 1, command: 'INSERT' };
    },
  });
  /** Lends the connection to `fn` as database.js's withClient does. @template T @param {(c: Lending) => Promise<T>} fn @returns {Promise<T>} */
  const withClient = async (fn) => {
    const lending = new Lending(client, { socket: { destroyed: false } });
    try {
      return await fn(lending);
    } catch (err) {
      throw lending.handOn(err);
    }
  };
  return { client, sent, withClient };
}

/** Sends `s` as database.js would: BEGIN and COMMIT through the lending's own. @param {Lending} c @param {string} s */
const send = (c, s) => (/^begin/i.test(s) ? c.begin(s) : s === 'COMMIT' ? c.commit() : c.query(s));

/** The failure of `statements` on one lending, the last failing with `failure`, as the lending hands it on. @param {string[]} statements @param {Error} failure */
async function failureAfter(statements, failure) {
  const last = statements.at(-1);
  const { withClient } = fakeConnection((text) => (text === last ? failure : undefined));
  return withClient(async (c) => {
    for (const s of statements) await send(c, s);
  }).then(
    () => assert.fail('the last statement fails'),
    (/** @type {unknown} */ err) => err,
  );
}

/** Whether the write may have been committed, as db/failure.js says. @param {unknown} err */
const outcomeInDoubt = (err) => classifyFailure(err).inDoubt;

describe('whether a failed write may have been committed (unit)', () => {
  test('a statement outside BEGIN commits itself: a lost connection after it was sent is in doubt', async () => {
    assert.equal(outcomeInDoubt(await failureAfter(['INSERT INTO users ...'], lost())), true);
    assert.equal(
      outcomeInDoubt(
        await failureAfter(['SET LOCAL lock_timeout = 250; INSERT INTO users ...'], lost()),
      ),
      true,
      'several statements in one simple query: one implicit transaction',
    );
  });

  test('in a transaction, only once its COMMIT was sent', async () => {
    assert.equal(
      outcomeInDoubt(await failureAfter(['BEGIN', 'INSERT INTO users ...'], lost())),
      false,
      'lost before COMMIT: PostgreSQL rolls back',
    );
    assert.equal(
      outcomeInDoubt(
        await failureAfter(
          ['BEGIN', 'SAVEPOINT chunk', 'ROLLBACK TO SAVEPOINT chunk', 'INSERT INTO users ...'],
          lost(),
        ),
      ),
      false,
      'ROLLBACK TO stays in the transaction',
    );
    assert.equal(
      outcomeInDoubt(await failureAfter(['BEGIN', 'INSERT INTO users ...', 'COMMIT'], lost())),
      true,
      'lost after COMMIT was sent',
    );
    assert.equal(
      outcomeInDoubt(
        await failureAfter(
          ['begin; SET LOCAL statement_timeout = 0', 'INSERT INTO users ...'],
          lost(),
        ),
      ),
      false,
      'BEGIN with more in one query',
    );
  });

  test("PostgreSQL's refusal of the statement rolled it back; a session it ended, or a crash, says nothing", async () => {
    // A trigger may raise any SQLSTATE as an ERROR: the statement is rolled back all the same.
    for (const code of ['23505', '55P03', '57014', '40P01', '23514', '08P01', 'XX000', '53300'])
      assert.equal(
        outcomeInDoubt(await failureAfter(['INSERT INTO users ...'], serverError(code))),
        false,
        code,
      );
    for (const [code, severity] of [
      ['57P01', 'FATAL'],
      ['57P02', 'FATAL'],
      ['57P01', 'FATALE'],
      ['08P01', 'FATAL'],
      ['XX000', 'PANIC'],
    ]) {
      assert.equal(
        outcomeInDoubt(await failureAfter(['BEGIN', 'COMMIT'], serverError(code, severity))),
        true,
        `${code} ${severity}`,
      );
    }
  });

  test('a connection not lent is not watched; each lending starts afresh', async () => {
    const { client, withClient } = fakeConnection((text) => (text === 'FAIL' ? lost() : undefined));
    await client.query('INSERT INTO users ...');
    await withClient((c) => c.query('SELECT 1'));
    const err = await withClient((c) => c.query('FAIL')).catch((e) => e);
    assert.equal(outcomeInDoubt(err), true, 'the failing query itself commits outside BEGIN');
    const inTx = await withClient(async (c) => {
      await c.begin('BEGIN');
      await c.query('FAIL');
    }).catch((e) => e);
    assert.equal(outcomeInDoubt(inTx), false);
  });

  test('the refusal: outcome_unknown whatever the diagnosis when in doubt; otherwise as before', async () => {
    const lostOnce = lost();
    const doubt = await failureAfter(['INSERT INTO users ...'], lostOnce);
    for (const diagnosis of /** @type {const} */ (['unavailable', 'transient', 'own']))
      assert.ok(refusalOfDatabaseState(diagnosis, doubt) instanceof OutcomeUnknownError, diagnosis);
    const sure = await failureAfter(['BEGIN', 'INSERT INTO users ...'], lost());
    assert.ok(refusalOfDatabaseState('unavailable', sure) instanceof DatabaseUnavailableError);
    assert.equal(refusalOfDatabaseState('transient', sure), undefined);
    assert.ok(
      refusalOfDatabaseState('lock_timeout', serverError('55P03')) instanceof DatabaseTimeoutError,
    );
    const refusal = /** @type {OutcomeUnknownError} */ (
      refusalOfDatabaseState('unavailable', doubt)
    );
    assert.deepEqual(
      [refusal.status, refusal.code, refusal.cause],
      [503, 'outcome_unknown', lostOnce],
      'its cause: the failure as pg gave it',
    );
    assert.match(refusal.message, /may have been written; retrying is safe/);
  });
});

describe('the writer tries a passing failure once more, and keeps the doubt (unit)', () => {
  /**
   * A writer over one fake connection whose attempts fail as `attempts` says, diagnosed as `diagnoses` says.
   * @param {((text: string) => Error | undefined)[]} attempts  one per lending
   * @param {import('../../src/db/database.js').Diagnosis[]} diagnoses  one per failure
   * @param {number} [chunkRows]
   */
  function writer(attempts, diagnoses, chunkRows = 1000) {
    let lending = -1;
    const connection = fakeConnection((text) => attempts[lending]?.(text));
    const withClient = (/** @type {(c: any) => Promise<any>} */ fn) => {
      lending++;
      if (attempts[lending] === null)
        return Promise.reject(new DatabaseUnavailableError(new Error('no connection')));
      return connection.withClient(fn);
    };
    const db = /** @type {any} */ ({
      withClient,
      settings: createTransactionSettings({ statementTimeoutMs: 1000 }),
      transaction: (/** @type {(c: any) => Promise<any>} */ fn) =>
        withClient(async (c) => {
          await c.begin('BEGIN');
          try {
            const result = await fn(c);
            await c.commit();
            return result;
          } catch (err) {
            await c.rollback().catch(() => {});
            throw err;
          }
        }),
      diagnose: async (/** @type {unknown} */ err) =>
        err instanceof DatabaseUnavailableError ? 'unavailable' : (diagnoses.shift() ?? 'own'),
    });
    const { write } = createUserWriter(db, { chunkRows, strategy: 'format' });
    return {
      writeUsers: (
        /** @type {import('../../src/users/user-schema.js').UserRow[]} */ r,
        /** @type {'ignore'} */ resolution,
      ) =>
        write({ kind: 'batch', rows: r, resolution, parts: [part(r)] }).then(
          ([outcome]) => outcome,
        ),
    };
  }
  const rows = [userRow({ email: 'a@x.co', name: 'A' }), userRow({ email: 'b@x.co', name: 'B' })];
  const failInsert = () => (/** @type {string} */ text) =>
    /^(?:SET LOCAL [^;]+; )*INSERT/.test(text) ? lost() : undefined;
  const succeed = () => () => undefined;

  test("in doubt, then written: the answer is the second attempt's", async () => {
    const counts = await writer([failInsert(), succeed()], ['transient']).writeUsers(
      rows,
      'ignore',
    );
    assert.deepEqual(counts, { received: 2, inserted: 1, updated: 0 });
  });

  test('in doubt, then refused for want of a connection: still outcome_unknown, never "nothing was written"', async () => {
    const err = await writer([failInsert(), /** @type {any} */ (null)], ['transient'])
      .writeUsers(rows, 'ignore')
      .catch((e) => e);
    assert.ok(err instanceof OutcomeUnknownError, String(err));
  });

  test('in doubt, then lost again: outcome_unknown (not a 500 that says nothing was written)', async () => {
    const err = await writer([failInsert(), failInsert()], ['transient', 'transient'])
      .writeUsers(rows, 'ignore')
      .catch((e) => e);
    assert.ok(err instanceof OutcomeUnknownError, String(err));
  });

  test('lost before its COMMIT, then refused: database_unavailable, nothing written', async () => {
    const err = await writer([failInsert(), /** @type {any} */ (null)], ['transient'], 1)
      .writeUsers(rows, 'ignore')
      .catch((e) => e);
    assert.ok(err instanceof DatabaseUnavailableError, String(err));
  });

  test('in doubt with the database unreachable: outcome_unknown at once', async () => {
    const err = await writer([failInsert()], ['unavailable'])
      .writeUsers(rows, 'ignore')
      .catch((e) => e);
    assert.ok(err instanceof OutcomeUnknownError, String(err));
  });

  test('group commit: every request of a group in doubt gets outcome_unknown; none is written alone', async () => {
    const lostOnce = lost();
    const doubt = await failureAfter(['INSERT INTO users ...'], lostOnce);
    /** @type {string[]} */
    const writes = [];
    const gc = createGroupCommit({
      /** @param {import('../../src/users/user-writer.js').WriteRequest} request */
      write: async ({ kind, rows: r }) => {
        writes.push(kind);
        if (kind === 'group') throw doubt;
        return [{ inserted: r.length, updated: 0 }];
      },
      policy: createWritePolicy({ diagnose: async () => 'transient' }),
      maxRows: 1000,
    });
    const answers = await Promise.allSettled([
      gc.writeUsers(part([rows[0]]), 'ignore'),
      gc.writeUsers(part([rows[1]]), 'ignore'),
    ]);
    for (const a of answers)
      assert.ok(
        a.status === 'rejected' &&
          a.reason instanceof OutcomeUnknownError &&
          a.reason.cause === lostOnce,
      );
    assert.ok(
      writes.every((w) => w === 'group'),
      writes.join(),
    );
  });
});
