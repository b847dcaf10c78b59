// PostgreSQL's time limits for the service's writes, set for each transaction, inside it, in the
// round trip that already carries its first statement: never on the connection. A connection
// behind a transaction pooler (PgBouncer in transaction mode, RDS Proxy, a managed "pooled" URL) is
// a different server connection from one transaction to the next, so a session setting would hold
// on some and not on others, and the pooler refuses one sent at connection time anyway (PgBouncer:
// "unsupported startup parameter: statement_timeout"). Every writer builds its settings here.

/**
 * The limits of one transaction, in milliseconds. A limit left out is not set (the server's own
 * applies); 0 sets it to none (a streamed import's statements may rightly run for minutes).
 * @typedef {{ statementTimeoutMs?: number, lockTimeoutMs?: number }} TimeLimits
 */

/**
 * The SET LOCALs a query may start with (tracing/pg-spans.js looks past them for the operation of
 * a query its writer did not label).
 * Only numbers follow the `=`: nothing from a request is ever put there.
 */
export const SETTINGS_PREFIX = /^\s*(?:SET LOCAL [a-z_]+ = \d+;\s*)*/;

/** @param {string} name @param {number | undefined} ms */
const setLocal = (name, ms) => (ms === undefined ? '' : `SET LOCAL ${name} = ${Math.max(0, Math.trunc(ms))}; `);

/** @param {TimeLimits} limits */
const settingsOf = (limits) => setLocal('statement_timeout', limits.statementTimeoutMs) + setLocal('lock_timeout', limits.lockTimeoutMs);

/**
 * The service's transaction settings: its defaults (DB_STATEMENT_TIMEOUT_MS, DB_LOCK_TIMEOUT_MS),
 * which a writer overrides for its own transactions as the write policy says (users/write-policy.js:
 * a group's short lock timeout, a streamed import's statements without a statement timeout).
 *
 * SET LOCAL holds until the transaction ends, and PostgreSQL starts each statement's timeout anew
 * with the value then in force, also between the statements of one simple query. So:
 * - `statement(sql)`: the settings, then `sql`, in one simple query. Several statements in one
 *   simple query are one implicit transaction: the settings hold for `sql` alone and go with it.
 *   `sql` must need no `$n` parameter (a query of several statements cannot carry any); its
 *   answer is then one result per statement, `sql`'s last (`lastResult`).
 * - `begin(limits, then)`: `BEGIN` and the settings (and `then`, more statements) in one round
 *   trip, for an explicit transaction; each statement after it runs under them.
 *
 * @param {{ statementTimeoutMs: number, lockTimeoutMs?: number }} defaults
 */
export function createTransactionSettings(defaults) {
  const base = settingsOf(defaults);
  /** @param {TimeLimits | undefined} overrides */
  const prefix = (overrides) => (overrides ? settingsOf({ ...defaults, ...overrides }) : base);
  return {
    defaults: Object.freeze({ ...defaults }),
    /**
     * One implicit transaction: the settings, then `sql` (one or more statements, no parameters).
     * @param {string} sql @param {TimeLimits} [overrides]
     */
    statement: (sql, overrides) => prefix(overrides) + sql,
    /**
     * The query that opens an explicit transaction under the settings; `then`, more statements
     * to run in the same round trip (a staging table the transaction uses).
     * @param {TimeLimits} [overrides] @param {string} [then]
     */
    begin: (overrides, then = '') => `BEGIN; ${prefix(overrides)}${then}`,
  };
}

/** @typedef {ReturnType<typeof createTransactionSettings>} TransactionSettings */

/**
 * The answer of a query's last statement: pg answers a query of several statements with an array
 * of results, one a statement.
 * @param {import('pg').QueryResult | import('pg').QueryResult[]} result
 */
export const lastResult = (result) => (Array.isArray(result) ? result[result.length - 1] : result);
