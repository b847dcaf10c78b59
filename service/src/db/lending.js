import { Writable } from 'node:stream';
import { DatabaseFailure } from '../errors.js';

// One lending of a pooled connection: every statement, BEGIN, COMMIT and ROLLBACK go through it,
// so it knows what had gone out when something failed, how long the statement had run and whether
// the connection was gone, and hands the failure on with that state (failure.js tells its meaning).

/** @typedef {import('pg').ClientBase} ClientBase */
/** @typedef {import('./lending-types.js').Seen} Seen */
/** @typedef {import('./lending-types.js').Statement} Statement */
/** @typedef {import('./lending-types.js').LendingOptions} LendingOptions */

export class Lending {
  #client;
  #socket;
  #readTimeoutMs;
  #trace;
  #statementTimeoutMs;
  #sentAt = 0;
  #inTransaction = false;
  #commitSent = false;
  #withCommit = '';
  /** @type {WeakSet<object>} failures of its statements and of its connection */
  #databaseFailures = new WeakSet();
  /** @type {WeakMap<object, Seen>} */
  #seen = new WeakMap();
  /** @type {unknown} the first error the connection emitted while lent */
  #connectionError;
  /** @type {unknown} what the borrower failed with */
  #thrown;

  /** @param {Pick<ClientBase, 'query'>} client @param {LendingOptions} options */
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
   * @template {Statement} S @param {S} statement
   * @returns {S extends Writable ? S : Promise<import('pg').QueryResult<any>>}
   */
  query(statement) {
    if (!this.#inTransaction) this.#commitSent = true;
    return this.#send(statement);
  }

  /**
   * BEGIN and its round trip's statements, under the transaction's own statement timeout if it
   * sets one, its answer awaited `readTimeoutMs` rather than the lending's read timeout.
   * @param {string} text @param {number} [statementTimeoutMs] @param {number} [readTimeoutMs]
   */
  begin(text, statementTimeoutMs, readTimeoutMs) {
    this.#inTransaction = true;
    if (statementTimeoutMs !== undefined) this.#statementTimeoutMs = statementTimeoutMs;
    const statement = {
      text,
      operation: 'BEGIN',
      ...(readTimeoutMs ? { query_timeout: readTimeoutMs } : {}),
    };
    return this.#send(statement, true);
  }

  /**
   * Statements (ending `; `) that commit with COMMIT or fail it, after any given before.
   * @param {string} sql
   */
  withCommit(sql) {
    this.#withCommit += sql;
  }

  commit() {
    this.#inTransaction = false;
    this.#commitSent = true;
    const text = `${this.#withCommit}COMMIT`;
    this.#withCommit = '';
    return this.#send({ text, operation: 'COMMIT' });
  }

  /** @param {unknown} [failure]  what failed the transaction, seen before ROLLBACK is sent */
  rollback(failure) {
    this.#see(failure);
    this.#inTransaction = false;
    return this.#send({ text: 'ROLLBACK', operation: 'ROLLBACK' });
  }

  /** The client emitted `err` while lent: its connection failed. @param {unknown} err */
  connectionFailed(err) {
    if (this.#connectionError !== undefined) return;
    this.#connectionError = err;
    if (isObject(err)) this.#databaseFailures.add(err);
  }

  /**
   * What to throw in place of the borrower's failure: a DatabaseFailure when one of its statements
   * or its connection failed with it, or once a commit had gone out; anything else as it came.
   * @param {unknown} thrown
   */
  handOn(thrown) {
    this.#thrown = thrown;
    if (!isObject(thrown) || thrown instanceof DatabaseFailure) return thrown;
    return this.#databaseFailures.has(thrown) || this.#commitSent ? this.failureOf(thrown) : thrown;
  }

  /** The first failure while lent, the connection's or else the borrower's, with its state. */
  firstFailure() {
    const first = this.#connectionError ?? this.#thrown;
    return first === undefined ? undefined : this.failureOf(first);
  }

  /** `err` with what this lending saw of it. @param {unknown} err */
  failureOf(err) {
    this.#see(err);
    const seen = isObject(err) ? this.#seen.get(err) : undefined;
    return new DatabaseFailure(err, {
      ...seen,
      commitSent: this.#commitSent,
      afterConnectionError: isObject(this.#connectionError) && err !== this.#connectionError,
    });
  }

  /** @param {Statement} statement @param {boolean} [atBegin] @returns {any} */
  #send(statement, atBegin = false) {
    const isCopy = statement instanceof Writable;
    const operation = isCopy
      ? 'COPY'
      : typeof statement === 'object'
        ? statement.operation
        : undefined;
    return this.#trace(operation, () => {
      this.#sentAt = performance.now();
      const answer = this.#client.query(/** @type {any} */ (statement));
      if (isCopy) {
        // pg answers a COPY with its stream, which fails with the server's refusal.
        statement.on('error', (err) => this.#databaseFailures.add(err));
        return answer;
      }
      const sent = this.#sentAt;
      const timeoutMs =
        (typeof statement === 'object' && statement.query_timeout) || this.#readTimeoutMs;
      return answer.catch((/** @type {unknown} */ err) => {
        if (isObject(err)) this.#databaseFailures.add(err);
        const unanswered = timeoutMs > 0 && performance.now() - sent >= timeoutMs;
        this.#see(err, { atBegin, unanswered });
        throw err;
      });
    });
  }

  /**
   * Notes the socket's state at each failure, and the time the statement had run once.
   * @param {unknown} err @param {{ atBegin?: boolean, unanswered?: boolean }} [at]
   */
  #see(err, { atBegin = false, unanswered = false } = {}) {
    if (!isObject(err)) return;
    const before = this.#seen.get(err);
    this.#seen.set(err, {
      pastStatementTimeout:
        before?.pastStatementTimeout ??
        (this.#statementTimeoutMs > 0 &&
          performance.now() - this.#sentAt >= this.#statementTimeoutMs),
      socketClosed: (before?.socketClosed ?? false) || this.#socket.destroyed,
      unanswered: (before?.unanswered ?? false) || unanswered,
      atBegin: (before?.atBegin ?? false) || atBegin,
    });
  }
}

/** @param {unknown} value @returns {value is object} */
const isObject = (value) => typeof value === 'object' && value !== null;
