import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { classifyFailure } from '../../src/db/failure.js';
import { DatabaseFailure, DatabaseUnavailableError } from '../../src/errors.js';

/** PostgreSQL's own error, as pg hands it on. @param {string} code @param {string} [severity] */
const serverError = (code, severity = 'ERROR') =>
  Object.assign(new pg.DatabaseError('from the server', 0, 'error'), { code, severity });
/** A Node socket error. @param {string} code */
const socketError = (code) => Object.assign(new Error(`connect ${code}`), { code });
const lost = () => new Error('Connection terminated unexpectedly');

describe('what a failure of the database means, decided in one place (unit)', () => {
  test('what failed is the cause a lending handed on, or the failure itself', () => {
    const err = serverError('23505');
    assert.equal(classifyFailure(new DatabaseFailure(err)).error, err);
    assert.equal(classifyFailure(err).error, err);
    assert.equal(classifyFailure(new DatabaseFailure(err)).code, '23505');
  });

  test('by SQLSTATE alone: a unique violation, a lock timeout; no lending needed', () => {
    assert.equal(classifyFailure(serverError('23505')).uniqueViolation, true);
    assert.equal(classifyFailure(serverError('23503')).uniqueViolation, false);
    assert.equal(classifyFailure(serverError('55P03')).timeout, 'lock_timeout');
    assert.equal(
      classifyFailure(serverError('57014')).timeout,
      undefined,
      'a cancel without the time it ran: not statement_timeout',
    );
    assert.equal(
      classifyFailure(new DatabaseFailure(serverError('57014'), { pastStatementTimeout: true }))
        .timeout,
      'statement_timeout',
    );
  });

  test('in doubt only once a commit went out, unless PostgreSQL refused and the session lives', () => {
    const sent = { commitSent: true };
    assert.equal(classifyFailure(new DatabaseFailure(lost(), sent)).inDoubt, true);
    assert.equal(classifyFailure(new DatabaseFailure(lost())).inDoubt, false);
    assert.equal(classifyFailure(lost()).inDoubt, false, 'no lending saw it');
    assert.equal(classifyFailure(new DatabaseFailure(serverError('23505'), sent)).inDoubt, false);
    for (const [code, severity] of [
      ['XX000', 'PANIC'],
      ['08P01', 'FATAL'],
      ['57P01', 'FATALE'],
    ])
      assert.equal(
        classifyFailure(new DatabaseFailure(serverError(code, severity), sent)).inDoubt,
        true,
        `${code} ${severity}`,
      );
  });

  test("pg's own failure is the connection's by what the lending saw, never by its message", () => {
    for (const state of [
      { socketClosed: true },
      { unanswered: true },
      { afterConnectionError: true },
    ])
      assert.equal(classifyFailure(new DatabaseFailure(lost(), state)).transient, true);
    assert.equal(classifyFailure(new DatabaseFailure(lost())).transient, false);
    assert.equal(
      classifyFailure(new DatabaseFailure(serverError('23505'), { socketClosed: true })).transient,
      false,
      "PostgreSQL's refusal stays the statement's",
    );
    assert.equal(classifyFailure(socketError('ECONNRESET')).transient, true);
  });

  test('a pooler in statement mode: 08P01 to a BEGIN, and nothing else', () => {
    const atBegin = { atBegin: true };
    assert.equal(
      classifyFailure(new DatabaseFailure(serverError('08P01'), atBegin)).statementPooling,
      true,
    );
    assert.equal(
      classifyFailure(new DatabaseFailure(serverError('08P01'))).statementPooling,
      false,
    );
    assert.equal(classifyFailure(serverError('08P01')).statementPooling, false);
    assert.equal(
      classifyFailure(new DatabaseFailure(socketError('08P01'), atBegin)).statementPooling,
      false,
      "not PostgreSQL's answer",
    );
  });

  test('no connection to be had, and what a person must fix to start', () => {
    assert.equal(classifyFailure(new DatabaseUnavailableError(lost())).unavailable, true);
    assert.equal(classifyFailure(lost()).unavailable, false);
    assert.equal(classifyFailure(serverError('28P01', 'FATAL')).misconfiguration, 'password');
    assert.equal(classifyFailure(serverError('3D000', 'FATAL')).misconfiguration, 'database');
    assert.equal(classifyFailure(socketError('ECONNREFUSED')).misconfiguration, 'refused');
    assert.equal(classifyFailure(socketError('EAI_AGAIN')).misconfiguration, 'host');
    assert.equal(classifyFailure(serverError('constructor')).misconfiguration, undefined);
  });
});
