import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { DatabaseFailure } from '../../src/errors.js';
import { logSafeError } from '../../src/log-safe-error.js';

/** An error shaped as pg's DatabaseError. @param {Record<string, unknown>} fields */
const databaseError = (fields) =>
  Object.assign(new Error(/** @type {string} */ (fields.message ?? 'failed')), {
    severity: 'ERROR',
    ...fields,
  });

describe('logSafeError (unit)', () => {
  test('a constraint violation: SQLSTATE, constraint, table and message, never the failing row', () => {
    const err = databaseError({
      message: 'new row for relation "users" violates check constraint "dba_names"',
      code: '23514',
      table: 'users',
      constraint: 'dba_names',
      detail: 'Failing row contains (a@b.co, Refused, null, $2b$12$abc).',
      where: 'SQL statement "INSERT ..."',
    });
    assert.deepEqual(logSafeError(err), {
      type: 'Error',
      code: '23514',
      severity: 'ERROR',
      table: 'users',
      constraint: 'dba_names',
      message: 'new row for relation "users" violates check constraint "dba_names"',
    });
  });

  test('a data exception keeps its SQLSTATE and withholds its message, which quotes the value', () => {
    const out = /** @type {Record<string, unknown>} */ (
      logSafeError(
        databaseError({
          message: 'invalid input syntax for type integer: "$2b$12$secret"',
          code: '22P02',
        }),
      )
    );
    assert.equal(out.code, '22P02');
    assert.doesNotMatch(JSON.stringify(out), /secret/);
  });

  test('a programming error keeps its message and stack; causes and aggregated errors are serialised the same way', () => {
    const pgErr = databaseError({
      message: 'syntax error at or near "$2b$12$x"',
      code: '42601',
      detail: 'x',
    });
    const out = /** @type {any} */ (
      logSafeError(new AggregateError([pgErr], 'two failed', { cause: new TypeError('boom') }))
    );
    assert.equal(out.message, 'two failed');
    assert.match(out.stack, /AggregateError/);
    assert.equal(out.cause.message, 'boom');
    assert.equal(out.errors[0].code, '42601');
    assert.doesNotMatch(JSON.stringify(out), /\$2b\$/);
  });

  test('a failure handed on by a lending is logged as what failed, alone or as a cause', () => {
    const err = databaseError({ message: 'deadlock detected', code: '40P01', detail: 'x' });
    const handedOn = new DatabaseFailure(err, { commitSent: true });
    assert.deepEqual(logSafeError(handedOn), logSafeError(err));
    const wrapping = /** @type {any} */ (logSafeError(new Error('outer', { cause: handedOn })));
    assert.deepEqual(wrapping.cause, logSafeError(err));
  });

  test("whatever a database error quotes in detail, where, hint or a risky class's message, none of it is logged (property)", () => {
    const sqlstate = fc
      .stringMatching(/^(2[0-9A-Z]|4[0-9A-Z]|XX|P0)[0-9A-Z]{3}$/)
      // The classes whose messages name objects, never values (log-safe-error.js), are kept.
      .filter((c) => !['23', '25', '28', '40'].includes(c.slice(0, 2)));
    fc.assert(
      fc.property(
        sqlstate,
        fc.string({ minLength: 8 }).map((s) => `SECRET<${s}>`),
        (code, secret) => {
          const err = databaseError({
            code,
            message: `value ${secret} refused`,
            detail: secret,
            where: secret,
            hint: secret,
            internalQuery: secret,
          });
          assert.ok(!JSON.stringify(logSafeError(err)).includes(secret));
        },
      ),
    );
  });
});
