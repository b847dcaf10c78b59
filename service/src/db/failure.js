import pg from 'pg';
import { DatabaseFailure, DatabaseUnavailableError, NOTHING_SEEN } from '../errors.js';
import { errorCode } from '../error-code.js';
import { WatchdogCutError } from './watchdog.js';

// What a failure of the database means, decided here alone, from what PostgreSQL or the socket
// said and what the lending saw of its connection: nothing else reads a code.

/** @import { FailureClass, Misconfiguration } from './db-types.js' */

// Passing failures, by errno and SQLSTATE class: the connection went away, the server is starting,
// stopping or out of connections, the statement was cancelled, deadlocked or out of serialization
// luck. The database's diagnosis confirms with a probe.
const TRANSIENT_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
]);
const TRANSIENT_SQLSTATE_PREFIXES = ['08', '53', '57P0', '57014', '40001', '40P01'];
const ENDS_THE_SESSION = new Set(['FATAL', 'PANIC']);
// Operator intervention (57P01, 57P02...): always FATAL, whatever the language of its severity.
const OPERATOR_ENDED = '57P';
const UNIQUE_VIOLATION = '23505';
// lock_timeout, and NOWAIT's refusal.
const LOCK_NOT_AVAILABLE = '55P03';
// statement_timeout, and an operator's or a trigger's cancel.
const QUERY_CANCELED = '57014';
// A pooler in statement mode answers a query that leaves a transaction open with it.
const PROTOCOL_VIOLATION = '08P01';
/** @type {ReadonlyMap<string, Misconfiguration>} */
const MISCONFIGURATIONS = new Map([
  ['28P01', 'password'],
  ['3D000', 'database'],
  ['ECONNREFUSED', 'refused'],
  ['ENOTFOUND', 'host'],
  ['EAI_AGAIN', 'host'],
]);

/**
 * What `failure` means: a DatabaseFailure by its cause and the connection's state, anything else
 * by itself alone. @param {unknown} failure @returns {Readonly<FailureClass>}
 */
export function classifyFailure(failure) {
  const seen = failure instanceof DatabaseFailure;
  const error = seen ? failure.cause : failure;
  const state = seen ? failure.state : NOTHING_SEEN;
  const code = errorCode(error);
  // PostgreSQL's own answer; pg's own failures (no SQLSTATE, no errno) are not.
  const answered = error instanceof pg.DatabaseError;
  const connectionLost =
    !answered &&
    code === undefined &&
    (state.socketClosed || state.unanswered || state.afterConnectionError);
  return Object.freeze({
    error,
    code,
    unavailable: error instanceof DatabaseUnavailableError,
    statementPooling: answered && code === PROTOCOL_VIOLATION && state.atBegin,
    timeout:
      code === LOCK_NOT_AVAILABLE
        ? 'lock_timeout'
        : answered && code === QUERY_CANCELED && state.pastStatementTimeout
          ? 'statement_timeout'
          : undefined,
    transient:
      error instanceof Error &&
      (error instanceof WatchdogCutError || connectionLost || isTransientCode(code)),
    // PostgreSQL's refusal rolled the statement back, unless it ended the session.
    inDoubt: state.commitSent && !(answered && sessionLives(error)),
    uniqueViolation: code === UNIQUE_VIOLATION,
    misconfiguration: code === undefined ? undefined : MISCONFIGURATIONS.get(code),
  });
}

/** @param {string | undefined} code */
const isTransientCode = (code) =>
  code !== undefined &&
  (TRANSIENT_ERRNOS.has(code) || TRANSIENT_SQLSTATE_PREFIXES.some((p) => code.startsWith(p)));

/** @param {pg.DatabaseError} error */
const sessionLives = (error) =>
  !ENDS_THE_SESSION.has(error.severity ?? '') && !(error.code ?? '').startsWith(OPERATOR_ENDED);
