import pg from 'pg';
import { DatabaseUnavailableError } from '../errors.js';
import { createDbWatchdog } from './watchdog.js';
import { endLending, startLending, watchCommits } from './lending.js';
import { createTransactionSettings, lastResult } from './transaction-settings.js';
import { traceQueries } from '../tracing/pg-spans.js';
import { NO_TRACING } from '../tracing/tracing.js';

// Failures that can come from the database's state rather than from the statement: the connection
// went away, the server is starting or stopping, or is out of connections, or the statement was
// cancelled, deadlocked or out of serialization luck. Whether the database is really unavailable is
// then confirmed by a probe on another connection (`diagnose`).
const TRANSIENT_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
const TRANSIENT_SQLSTATE = /^(08|53|57P0|57014|40001|40P01)/;
const TRANSIENT_MESSAGES = /timeout exceeded when trying to connect|Connection terminated|connection error and is not queryable|Query read timeout|Client has encountered a connection error|connection cut by the watchdog/i;

const READY = "SELECT to_regclass('public.users') IS NOT NULL AS ready";
// A query running this long makes the watchdog ask whether the database answers (db-watchdog.js).
const STALL_MS = 2_000;
// A probe that found the database unreachable is believed this long: requests meanwhile get 503 at
// once instead of each finding out on a connection of its own that hangs.
const UNREACHABLE_HOLD_MS = 1_000;

/** @param {unknown} err */
export function isTransient(err) {
  if (!(err instanceof Error)) return false;
  const code = /** @type {{ code?: unknown }} */ (err).code;
  if (typeof code === 'string' && (TRANSIENT_ERRNOS.has(code) || TRANSIENT_SQLSTATE.test(code))) return true;
  return TRANSIENT_MESSAGES.test(err.message);
}

/**
 * Which of the database's own time limits a failure is, if any: a lock another writer held past
 * lock_timeout (55P03, also NOWAIT's refusal), or a statement cancelled by statement_timeout (57014
 * says only "cancelled"; its message tells a timeout from an operator's pg_cancel_backend).
 * @param {unknown} err
 * @returns {'lock_timeout' | 'statement_timeout' | undefined}
 */
export function timeoutOf(err) {
  const { code, message } = /** @type {{ code?: unknown, message?: unknown }} */ (err ?? {});
  if (code === '55P03') return 'lock_timeout';
  if (code === '57014' && typeof message === 'string' && message.includes('statement timeout')) return 'statement_timeout';
  return undefined;
}

/**
 * What a failed write means:
 * - unavailable: no connection could be had, or a transient failure and the probe failed too;
 * - lock_timeout / statement_timeout: the database's own time limit ended it (timeoutOf): its
 *   state, not the request's fault, and trying again at once would wait as long;
 * - transient: the database answers a probe, so the attempt failed for a passing reason (one
 *   connection lost, a deadlock): the write may be tried again once;
 * - own: the statement itself failed, and will fail the same way again.
 * Apart from what it means, whether the write may have been committed all the same (its commit was
 * sent, its answer lost) is db-outcome.js's outcomeInDoubt. What either means for the write is the
 * write policy's to decide (users/write-policy.js).
 * @typedef {'unavailable' | 'lock_timeout' | 'statement_timeout' | 'transient' | 'own'} Diagnosis
 */

/**
 * @typedef {object} Database
 * @property {pg.Pool} pool
 * @property {<T>(fn: (client: pg.PoolClient) => Promise<T>) => Promise<T>} withClient
 * @property {<T>(fn: (client: pg.PoolClient) => Promise<T>, options?: { limits?: import('./transaction-settings.js').TimeLimits, then?: string }) => Promise<T>} transaction
 *   BEGIN under the transaction settings (limits: overrides of the defaults; then: more statements
 *   in BEGIN's round trip), fn, COMMIT; ROLLBACK when fn fails
 * @property {import('./transaction-settings.js').TransactionSettings} settings  the time limits every
 *   transaction sets for itself (DB_STATEMENT_TIMEOUT_MS, DB_LOCK_TIMEOUT_MS): nothing is set on a connection
 * @property {() => Promise<boolean>} isReady  the database answers and the schema is in place
 * @property {(err: unknown) => Promise<Diagnosis>} diagnose  what a failed write means (see Diagnosis)
 * @property {() => Promise<boolean>} isTableLocked  another session holds a lock on users that stops every insert
 * @property {() => Promise<void>} close
 */

/**
 * The one module that owns the pool. Every query goes through a client it lends; a client that
 * cannot be had is DatabaseUnavailableError (503), and `diagnose` says what any other failure means.
 * A connection carries no state from one transaction to the next (no time limit in its startup
 * parameters, no session SET, no named prepared statement, no session lock, no temporary table
 * that outlives its transaction), so DATABASE_URL may be a transaction pooler's: every transaction
 * sets its own time limits (transaction-settings.js).
 *
 * @param {{ databaseUrl: string, dbPoolMax: number, dbConnectTimeoutMs: number, dbStatementTimeoutMs: number, dbLockTimeoutMs?: number }} config
 * @param {import('pino').Logger} logger
 * @param {import('../tracing/tracing.js').Tracing} [tracing]  off (NO_TRACING) unless handed one
 * @returns {Database}
 */
export function createDatabase(config, logger, tracing = NO_TRACING) {
  const { connection, pool } = createPool(config, logger, tracing);
  // The server-side limits, set by each transaction for itself. A row another writer holds (an
  // uncommitted insert of the same email, SELECT ... FOR UPDATE) is waited for DB_LOCK_TIMEOUT_MS,
  // then the write gets 503 lock_timeout instead of waiting with it.
  const settings = createTransactionSettings({ statementTimeoutMs: config.dbStatementTimeoutMs, lockTimeoutMs: config.dbLockTimeoutMs });

  const { probe, answers, knownUnreachable } = createProbe(connection, config.dbConnectTimeoutMs, settings);

  const watchdog = createDbWatchdog({
    probe: answers,
    stallMs: STALL_MS,
    onCut: (count) => logger.warn({ connections: count }, 'database unreachable: cut the connections in flight'),
  });

  const withClient = createLender(pool, watchdog, knownUnreachable);

  /** @type {Database['diagnose']} */
  async function diagnose(err) {
    if (err instanceof DatabaseUnavailableError) return 'unavailable';
    const timeout = timeoutOf(err);
    if (timeout) return timeout;
    if (!isTransient(err)) return 'own';
    if (knownUnreachable()) return 'unavailable';
    return (await answers()) ? 'transient' : 'unavailable';
  }

  return {
    pool,
    withClient,
    transaction: createTransaction(withClient, settings),
    settings,
    isReady: async () => (await probe()).ready,
    diagnose,
    isTableLocked: () => isTableLocked(withClient, settings),
    close: () => {
      watchdog.stop();
      return pool.end();
    },
  };
}

/**
 * The pool, and what listens on it: an idle connection lost is logged, what each connection sends
 * is watched (db-outcome.js), and traced (tracing/pg-spans.js) when tracing is on.
 * @param {{ databaseUrl: string, dbPoolMax: number, dbConnectTimeoutMs: number, dbStatementTimeoutMs: number }} config
 * @param {import('pino').Logger} logger @param {import('../tracing/tracing.js').Tracing} tracing
 * @returns {{ connection: pg.ClientConfig, pool: pg.Pool }}  connection: what a connection of the probe's own is made with
 */
function createPool(config, logger, tracing) {
  const connection = {
    connectionString: config.databaseUrl,
    application_name: 'sluice',
    // Idle connections notice a dead peer; a connection in use is the watchdog's (db-watchdog.js).
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  };
  const pool = new pg.Pool({
    ...connection,
    max: config.dbPoolMax,
    // A request waits this long for a free connection, then gets 503: never an unbounded queue.
    connectionTimeoutMillis: config.dbConnectTimeoutMs,
    idleTimeoutMillis: 30_000,
    // Client-side too, so that a database that stops answering (not just refusing) cannot hang us.
    query_timeout: config.dbStatementTimeoutMs + 5_000,
  });
  // An idle client whose server went away emits here; unhandled, it would crash the process.
  pool.on('error', (err) => logger.warn({ err }, 'idle database connection lost'));
  // Whether a failed write may have been committed is told by what was sent on its connection.
  pool.on('connect', watchCommits);
  // Traced, each query made for a traced request is a span (tracing/pg-spans.js).
  if (tracing.enabled) pool.on('connect', (client) => traceQueries(client, tracing));
  return { connection, pool };
}

/**
 * Lends a client of the pool to `fn` (holdClient): 503 (DatabaseUnavailableError) at once while a
 * probe has just found the database unreachable, or when no client can be had in time.
 * @param {pg.Pool} pool @param {ReturnType<typeof createDbWatchdog>} watchdog @param {() => boolean} knownUnreachable
 * @returns {Database['withClient']}
 */
function createLender(pool, watchdog, knownUnreachable) {
  return async (fn) => {
    if (knownUnreachable()) throw new DatabaseUnavailableError(new Error('database unreachable (a probe failed within the last second)'));
    let client;
    try {
      client = await pool.connect();
    } catch (err) {
      throw new DatabaseUnavailableError(err);
    }
    return holdClient(client, watchdog, fn);
  };
}

/**
 * @param {Database['withClient']} withClient @param {import('./transaction-settings.js').TransactionSettings} settings
 * @returns {Database['transaction']}
 */
function createTransaction(withClient, settings) {
  return (fn, { limits, then } = {}) =>
    withClient(async (client) => {
      try {
        // In the try: a failure of BEGIN's round trip (a statement of `then`) leaves it open.
        await client.query(settings.begin(limits, then));
        const result = await fn(client);
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      }
    });
}

/**
 * Does another session hold a lock on users that stops every insert?
 * @param {Database['withClient']} withClient @param {import('./transaction-settings.js').TransactionSettings} settings
 * @returns {Promise<boolean>}
 */
function isTableLocked(withClient, settings) {
  // ROW EXCLUSIVE is what every INSERT takes; NOWAIT refuses at once if a SHARE lock or stronger
  // (CREATE INDEX without CONCURRENTLY, LOCK TABLE, ALTER TABLE) is held or queued. LOCK TABLE
  // needs a transaction: the settings' SET LOCALs make the query one (implicit), which ends, and
  // lets the lock go, with the query: one round trip.
  return withClient(async (client) => {
    try {
      await client.query(settings.statement('LOCK TABLE users IN ROW EXCLUSIVE MODE NOWAIT'));
      return false;
    } catch (err) {
      if (timeoutOf(err) === 'lock_timeout') return true;
      throw err;
    }
  }).catch(() => false);
}

/**
 * Does the database answer, and is the schema in place? Asked on a fresh connection of its own,
 * never a pooled one; the last answer is remembered (a database found unreachable is believed
 * UNREACHABLE_HOLD_MS).
 * @param {pg.ClientConfig} connection @param {number} connectTimeoutMs
 * @param {import('./transaction-settings.js').TransactionSettings} settings
 */
function createProbe(connection, connectTimeoutMs, settings) {
  /** @type {{ at: number, answered: boolean, ready: boolean } | undefined} */
  let lastProbe;
  /** @type {Promise<{ answered: boolean, ready: boolean }> | undefined} */
  let probing;
  /**
   * Does the database answer, on a fresh connection of its own (a pooled one may be the one that
   * hangs), within the connect timeout? Concurrent callers share one probe: a failing group of 300
   * requests asks once, not 300 times.
   */
  function probe() {
    probing ??= (async () => {
      const client = new pg.Client({ ...connection, connectionTimeoutMillis: connectTimeoutMs, query_timeout: connectTimeoutMs });
      client.on('error', () => {});
      try {
        await client.connect();
        // Through a pooler it waits for a server connection: bounded on both sides.
        const result = await client.query(settings.statement(READY, { statementTimeoutMs: connectTimeoutMs }));
        return { answered: true, ready: lastResult(result).rows[0].ready === true };
      } catch {
        return { answered: false, ready: false };
      } finally {
        client.end().catch(() => {});
      }
    })()
      .then((result) => {
        lastProbe = { at: performance.now(), ...result };
        return result;
      })
      .finally(() => {
        probing = undefined;
      });
    return probing;
  }
  const answers = async () => (await probe()).answered;
  const knownUnreachable = () => lastProbe !== undefined && !lastProbe.answered && performance.now() - lastProbe.at < UNREACHABLE_HOLD_MS;
  return { probe, answers, knownUnreachable };
}

/**
 * Runs `fn` with a client lent by the pool, watched as long as it is held, and gives it back:
 * destroyed rather than lent again when it may have lost its connection.
 * @template T
 * @param {pg.PoolClient} client @param {ReturnType<typeof createDbWatchdog>} watchdog
 * @param {(client: pg.PoolClient) => Promise<T>} fn
 * @returns {Promise<T>}
 */
async function holdClient(client, watchdog, fn) {
  startLending(client);
  // pg-pool removes its own 'error' listener from a client it lends out. A connection that dies
  // while we hold the client between two queries (PostgreSQL crashed, a failover, a cut network)
  // would then emit an unhandled 'error' and take the whole process down. So we listen for as
  // long as we hold it, and a client that failed this way is destroyed, never reused.
  /** @type {unknown} */
  let failure;
  /** @type {unknown} */
  let thrown;
  /** @param {Error} err */
  const onError = (err) => {
    failure ??= err;
  };
  client.on('error', onError);
  const done = watchdog.watch((err) => /** @type {{ connection: { stream: import('node:net').Socket } }} */ (/** @type {unknown} */ (client)).connection.stream.destroy(err));
  try {
    return await fn(client);
  } catch (err) {
    failure ??= err;
    thrown = err;
    throw err;
  } finally {
    done();
    client.off('error', onError);
    // The failure is in doubt when its commit had been sent (db-outcome.js).
    endLending(client, thrown);
    // A client whose statement failed for its own reason is fine; one that may have lost its
    // connection is destroyed rather than lent again.
    client.release(failure !== undefined && isTransient(failure) ? /** @type {Error} */ (failure) : undefined);
  }
}
