// Time limits set by each transaction for itself (SET LOCAL), never on the connection: behind a
// transaction pooler, a session setting would stay on a server connection others then get.

/** @typedef {import('./db-types.js').TimeLimits} TimeLimits */

/** @param {string} name @param {number | undefined} ms */
const setLocal = (name, ms) =>
  ms === undefined ? '' : `SET LOCAL ${name} = ${Math.max(0, Math.trunc(ms))}; `;

/** @param {TimeLimits} limits */
const settingsOf = (limits) =>
  setLocal('statement_timeout', limits.statementTimeoutMs) +
  setLocal('lock_timeout', limits.lockTimeoutMs);

/**
 * `statement(sql)`: the settings then `sql` in one simple query, one implicit transaction (no `$n`
 * parameters); `begin(limits, then)`: BEGIN, the settings and `then` in one round trip.
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

/** pg answers several statements with an array. @param {import('./db-types.js').Answer} result */
export const lastResult = (result) => (Array.isArray(result) ? result[result.length - 1] : result);
