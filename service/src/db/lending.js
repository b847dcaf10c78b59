import { Writable } from 'node:stream';
import pg from 'pg';
import { errorCode } from '../error-code.js';

// One lending of a pooled connection: every statement goes through it, and BEGIN, COMMIT and
// ROLLBACK through its own methods, so it knows whether a commit went out (a COMMIT, or a statement
// outside BEGIN). A failure after that, other than PostgreSQL's refusal, may have committed.

const ENDS_THE_SESSION = new Set(['FATAL', 'PANIC']);
// Operator intervention (57P01, 57P02...): always FATAL, whatever the language of its severity.
const OPERATOR_ENDED = '57P';

/** @type {WeakSet<object>} failures after which the write may have been committed */
const inDoubt = new WeakSet();
/**
 * @type {WeakSet<object>} cancellations (57014) after the statement timeout in force had run out
 */
const outOfTime = new WeakSet();
/** @type {WeakSet<object>} BEGINs refused: no transaction was opened */
const refusedBegins = new WeakSet();
/**
 * @type {WeakSet<object>} failures of the connection, not of the statement (lost, or no answer in
 *   time)
 */
const ofTheConnection = new WeakSet();

/**
 * Text, or a query config whose `operation` labels its span, or a COPY stream.
 * @typedef {string | (pg.QueryConfig & { operation?: string,
 *   query_timeout?: number }) | Writable} Statement
 */
/**
 * socket: the connection's own; readTimeoutMs: pg's query_timeout; statementTimeoutMs: the default
 * statement_timeout (0 or none: not set); trace: a statement's span (tracing/pg-spans.js).
 * @typedef {{ socket: { readonly destroyed: boolean }, readTimeoutMs?: number,
 *   statementTimeoutMs?: number,
 *   trace?: (operation: string | undefined, send: () => any) => any }} LendingOptions
 */

export class Lending {
  #client;
  #socket;
  #readTimeoutMs;
  #trace;
  #statementTimeoutMs;
  #sentAt = 0;
  /** @type {WeakSet<object>} */ #noted = new WeakSet();
  #inTransaction = false;
  #commitSent = false;
  #withCommit = '';

  /** @param {Pick<pg.ClientBase, 'query'>} client @param {LendingOptions} options */
  constructor(
    client,
    {
      socket,
      readTimeoutMs = Infinity,
      statementTimeoutMs = 0,
      trace = (_operation, send) => send(),
    },
  ) {
    this.#statementTimeoutMs = statementTimeoutMs;
    this.#client = client;
    this.#socket = socket;
    this.#readTimeoutMs = readTimeoutMs;
    this.#trace = trace;
  }

  /**
   * Sends a statement: outside BEGIN it commits itself.
   * @template {Statement} S
   * @param {S} statement
   * @returns {S extends Writable ? S : Promise<pg.QueryResult<any>>}
   */
  query(statement) {
    if (!this.#inTransaction) this.#commitSent = true;
    return this.#send(statement);
  }

  /**
   * @param {string} text BEGIN and its round trip's statements
   * @param {number} [statementTimeoutMs] the transaction's own, when it sets one
   * @param {number} [readTimeoutMs] its answer awaited this long rather than the lending's read
   *   timeout
   */
  begin(text, statementTimeoutMs, readTimeoutMs) {
    this.#inTransaction = true;
    if (statementTimeoutMs !== undefined) this.#statementTimeoutMs = statementTimeoutMs;
    const statement = {
      text,
      operation: 'BEGIN',
      ...(readTimeoutMs ? { query_timeout: readTimeoutMs } : {}),
    };
    return this.#send(statement).catch((/** @type {unknown} */ err) => {
      throw refusedToBegin(err);
    });
  }

  /**
   * Statements for the COMMIT's round trip, before it: they commit with the transaction or fail it.
   * @param {string} sql ending with `; `
   */
  withCommit(sql) {
    this.#withCommit = sql;
  }

  commit() {
    this.#inTransaction = false;
    this.#commitSent = true;
    const text = `${this.#withCommit}COMMIT`;
    this.#withCommit = '';
    return this.#send({ text, operation: 'COMMIT' });
  }

  /** @param {unknown} [failure]  what failed the transaction, noted before ROLLBACK is sent */
  rollback(failure) {
    if (typeof failure === 'object' && failure !== null) this.#noteFailure(failure, 0);
    this.#inTransaction = false;
    return this.#send({ text: 'ROLLBACK', operation: 'ROLLBACK' });
  }

  /**
   * Given back: `failure` after a commit was sent is in doubt unless PostgreSQL refused it and the
   * session lives. connectionError: what the client emitted while lent; pg's own failure of a
   * statement sent after it (refused at once, the socket not yet closed) is the connection's.
   * @param {unknown} [failure] @param {unknown} [connectionError]
   */
  end(failure, connectionError) {
    const connectionFailed = typeof connectionError === 'object' && connectionError !== null;
    if (connectionFailed) this.#noteFailure(connectionError, 0);
    if (typeof failure !== 'object' || failure === null) return;
    this.#noteFailure(failure, 0);
    if (
      connectionFailed &&
      failure !== connectionError &&
      !(failure instanceof pg.DatabaseError) &&
      errorCode(failure) === undefined
    )
      ofTheConnection.add(failure);
    if (!this.#commitSent) return;
    if (
      failure instanceof pg.DatabaseError &&
      !ENDS_THE_SESSION.has(failure.severity ?? '') &&
      !(failure.code ?? '').startsWith(OPERATOR_ENDED)
    )
      return;
    inDoubt.add(failure);
  }

  /** @param {Statement} statement @returns {any} */
  #send(statement) {
    const isCopy = statement instanceof Writable;
    const operation = isCopy
      ? 'COPY'
      : typeof statement === 'object'
        ? statement.operation
        : undefined;
    return this.#trace(operation, () => {
      this.#sentAt = performance.now();
      const answer = this.#client.query(/** @type {any} */ (statement));
      if (isCopy) return answer;
      const sent = this.#sentAt;
      const timeoutMs =
        (typeof statement === 'object' && statement.query_timeout) || this.#readTimeoutMs;
      return answer.catch((/** @type {unknown} */ err) => {
        if (typeof err === 'object' && err !== null)
          this.#noteFailure(err, performance.now() - sent >= timeoutMs ? timeoutMs : 0);
        throw err;
      });
    });
  }

  /**
   * pg's own failure (no SQLSTATE, no errno) is the connection's when its socket is gone or the
   * statement went unanswered its read timeout.
   * @param {object} err
   * @param {number} timedOutAfterMs
   */
  #noteFailure(err, timedOutAfterMs) {
    // Timed from the statement that failed: noted once, at its answer (or before ROLLBACK).
    if (!this.#noted.has(err)) {
      this.#noted.add(err);
      if (
        err instanceof pg.DatabaseError &&
        err.code === '57014' &&
        this.#statementTimeoutMs > 0 &&
        performance.now() - this.#sentAt >= this.#statementTimeoutMs
      )
        outOfTime.add(err);
    }
    if (err instanceof pg.DatabaseError || errorCode(err) !== undefined) return;
    if (this.#socket.destroyed || timedOutAfterMs > 0) ofTheConnection.add(err);
  }
}

/** Whether the write that failed with `err` may have been committed. @param {unknown} err */
export const outcomeInDoubt = (err) => typeof err === 'object' && err !== null && inDoubt.has(err);

/**
 * Whether `err` was the connection's failure (lost, or unanswered), as a lending saw it.
 * @param {unknown} err
 */
export const failedConnection = (err) =>
  typeof err === 'object' && err !== null && ofTheConnection.has(err);

/** Notes that `err` refused a BEGIN: no transaction was opened. @param {unknown} err */
export function refusedToBegin(err) {
  if (typeof err === 'object' && err !== null) refusedBegins.add(err);
  return err;
}

/**
 * A pooler in statement mode (PgBouncer) refused to open a transaction: 08P01 to a BEGIN.
 * @param {unknown} err
 */
export const isStatementPooling = (err) =>
  err instanceof pg.DatabaseError && err.code === '08P01' && refusedBegins.has(err);

/**
 * A cancellation (57014) that came once the statement timeout in force had run out:
 * statement_timeout, not an operator's cancel.
 * @param {unknown} err
 */
export const ranOutOfTime = (err) => typeof err === 'object' && err !== null && outOfTime.has(err);
