import pg from 'pg';

// Whether a write that failed may have been committed all the same. PostgreSQL commits a
// transaction when it runs its COMMIT, or, outside BEGIN, when it runs the statement itself (an
// implicit transaction: one simple query, whatever it holds). Once that was sent, a lost connection
// (PostgreSQL crashed or paused, the network cut, the watchdog's cut) says nothing of whether it
// ran: the answer may be what was lost. Before it was sent, the server rolls the transaction back
// when it finds the connection gone, so nothing was written. The pooled connections' queries are
// watched here, in one place, whoever sends them (db.js lends the connections).

const BEGINS = /^\s*(?:BEGIN|START\s+TRANSACTION)\b/i;
const COMMITS = /^\s*(?:COMMIT|END)\b/i;
// ROLLBACK TO SAVEPOINT stays in the transaction.
const ROLLS_BACK = /^\s*(?:ROLLBACK|ABORT)\b(?!\s+TO\b)/i;
// PostgreSQL's answer to the statement is an error that rolled it back, unless it ended the session
// (severity FATAL or PANIC): an operator's pg_terminate_backend or a shutdown (57P01, 57P02) can
// come after the commit, before its answer. The severity is in the server's language, so the
// operator-intervention codes (57P, only ever sent as FATAL) are checked as well.
const ENDS_THE_SESSION = new Set(['FATAL', 'PANIC']);
const OPERATOR_ENDED = /^57P/;

/** @typedef {{ inTransaction: boolean, commitSent: boolean }} Lending */

/** @type {WeakMap<pg.ClientBase, Lending>} the connections lent now, and what was sent on each */
const lendings = new WeakMap();
/** @type {WeakSet<object>} failures after which the write may have been committed */
const inDoubt = new WeakSet();

/**
 * Watches a pooled connection's queries (called once per connection, db.js): while it is lent,
 * each query sent is noted, as text only as far as its first keyword.
 * @param {pg.ClientBase} client
 */
export function watchCommits(client) {
  const query = /** @type {(...args: any[]) => any} */ (client.query);
  client.query = /** @type {any} */ (function noted(/** @type {any[]} */ ...args) {
    const lending = lendings.get(client);
    if (lending) note(lending, typeof args[0] === 'string' ? args[0] : args[0]?.text);
    return query.apply(this, args);
  });
}

/** @param {Lending} lending @param {unknown} text */
function note(lending, text) {
  if (typeof text !== 'string') return;
  if (BEGINS.test(text)) {
    lending.inTransaction = true;
  } else if (COMMITS.test(text)) {
    lending.inTransaction = false;
    lending.commitSent = true;
  } else if (ROLLS_BACK.test(text)) {
    lending.inTransaction = false;
  } else if (!lending.inTransaction) {
    lending.commitSent = true;
  }
}

/** A connection lent out: nothing sent on it yet. @param {pg.ClientBase} client */
export function startLending(client) {
  lendings.set(client, { inTransaction: false, commitSent: false });
}

/**
 * A connection given back, after `failure` when the work on it failed: the failure is marked in
 * doubt when a commit (or a statement that commits itself) was sent and the failure is not
 * PostgreSQL's refusal of it.
 * @param {pg.ClientBase} client @param {unknown} [failure]
 */
export function endLending(client, failure) {
  const lending = lendings.get(client);
  lendings.delete(client);
  if (!lending?.commitSent || typeof failure !== 'object' || failure === null) return;
  if (failure instanceof pg.DatabaseError && !ENDS_THE_SESSION.has(failure.severity ?? '') && !OPERATOR_ENDED.test(failure.code ?? '')) return;
  inDoubt.add(failure);
}

/**
 * Whether the write that failed with `err` may have been committed (its commit was sent and no
 * answer to it came).
 * @param {unknown} err
 */
export const outcomeInDoubt = (err) => typeof err === 'object' && err !== null && inDoubt.has(err);
