// PostgreSQL's time limits for the service's writes, set by each transaction for itself (SET LOCAL
// in the round trip of its first statement), never on the connection: behind a transaction pooler
// each transaction may get another server connection, and a session setting would hold on some.

/**
 * A transaction's limits in ms: one left out is not set, 0 sets none.
 * @typedef {{ statementTimeoutMs?: number, lockTimeoutMs?: number }} TimeLimits
 */

/** @param {string} name @param {number | undefined} ms */
const setLocal = (name, ms) =>
  ms === undefined ? '' : `SET LOCAL ${name} = ${Math.max(0, Math.trunc(ms))}; `;

/** @param {TimeLimits} limits */
const settingsOf = (limits) =>
  setLocal('statement_timeout', limits.statementTimeoutMs) +
  setLocal('lock_timeout', limits.lockTimeoutMs);

/**
 * The service's defaults (DB_STATEMENT_TIMEOUT_MS, DB_LOCK_TIMEOUT_MS), which a writer overrides as
 * the write policy says. `statement(sql)`: the settings then `sql` in one simple query, one
 * implicit transaction (no `$n` parameters; its answer is `lastResult`). `begin(limits, then)`:
 * BEGIN, the settings and `then` in one round trip.
 * @param {{ statementTimeoutMs: number, lockTimeoutMs?: number }} defaults
 */
export function createTransactionSettings(defaults) {
  const base = settingsOf(defaults);
  /** @param {TimeLimits | undefined} overrides */
  const prefix = (overrides) => (overrides ? settingsOf({ ...defaults, ...overrides }) : base);
  return {
    defaults: Object.freeze({ ...defaults }),
    /** @param {string} sql @param {TimeLimits} [overrides] */
    statement: (sql, overrides) => prefix(overrides) + sql,
    /** @param {TimeLimits} [overrides] @param {string} [then] */
    begin: (overrides, then = '') => `BEGIN; ${prefix(overrides)}${then}`,
  };
}

/** @typedef {ReturnType<typeof createTransactionSettings>} TransactionSettings */

/**
 * The answer of a query's last statement (pg answers several statements with an array).
 * @param {import('pg').QueryResult | import('pg').QueryResult[]} result
 */
export const lastResult = (result) => (Array.isArray(result) ? result[result.length - 1] : result);
