import pg from 'pg';
import { DatabaseUnavailableError } from './errors.js';

// Failures that can come from the database's state rather than from the statement: the connection
// went away, the server is starting or stopping, or is out of connections, or the statement was
// cancelled, deadlocked or out of serialization luck. Whether the database is really unavailable is
// then confirmed by a probe on another connection (`diagnose`).
const TRANSIENT_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
const TRANSIENT_SQLSTATE = /^(08|53|57P0|57014|40001|40P01|55P03)/;
const TRANSIENT_MESSAGES = /timeout exceeded when trying to connect|Connection terminated|connection error and is not queryable|Query read timeout|Client has encountered a connection error/i;

/** @param {unknown} err */
export function isTransient(err) {
  if (!(err instanceof Error)) return false;
  const code = /** @type {{ code?: unknown }} */ (err).code;
  if (typeof code === 'string' && (TRANSIENT_ERRNOS.has(code) || TRANSIENT_SQLSTATE.test(code))) return true;
  return TRANSIENT_MESSAGES.test(err.message);
}

/**
 * What a failed write means:
 * - unavailable: no connection could be had, or a transient failure and the probe failed too;
 * - transient: the database answers a probe, so the attempt failed for a passing reason (one
 *   connection lost, a deadlock): the write may be tried again once;
 * - own: the statement itself failed, and will fail the same way again.
 * @typedef {'unavailable' | 'transient' | 'own'} Diagnosis
 */

/**
 * @typedef {object} Database
 * @property {pg.Pool} pool
 * @property {<T>(fn: (client: pg.PoolClient) => Promise<T>) => Promise<T>} withClient
 * @property {<T>(fn: (client: pg.PoolClient) => Promise<T>) => Promise<T>} transaction
 * @property {() => Promise<boolean>} isReady  the database answers and the schema is in place
 * @property {(err: unknown) => Promise<Diagnosis>} diagnose  what a failed write means (see Diagnosis)
 * @property {() => Promise<void>} close
 */

/**
 * The one module that owns the pool. Every query goes through a client it lends; a client that
 * cannot be had is DatabaseUnavailableError (503), and `diagnose` says what any other failure means.
 *
 * @param {{ databaseUrl: string, dbPoolMax: number, dbConnectTimeoutMs: number, dbStatementTimeoutMs: number }} config
 * @param {import('pino').Logger} logger
 * @returns {Database}
 */
export function createDatabase(config, logger) {
  const pool = new pg.Pool({
    connectionString: config.databaseUrl,
    max: config.dbPoolMax,
    // A request waits this long for a free connection, then gets 503: never an unbounded queue.
    connectionTimeoutMillis: config.dbConnectTimeoutMs,
    idleTimeoutMillis: 30_000,
    statement_timeout: config.dbStatementTimeoutMs,
    // Client-side too, so that a database that stops answering (not just refusing) cannot hang us.
    query_timeout: config.dbStatementTimeoutMs + 5_000,
    application_name: 'sluice',
  });
  // An idle client whose server went away emits here; unhandled, it would crash the process.
  pool.on('error', (err) => logger.warn({ err: { message: err.message, code: /** @type {any} */ (err).code } }, 'idle database connection lost'));

  /** @type {Database['withClient']} */
  async function withClient(fn) {
    let client;
    try {
      client = await pool.connect();
    } catch (err) {
      throw new DatabaseUnavailableError(err);
    }
    // pg-pool removes its own 'error' listener from a client it lends out. A connection that dies
    // while we hold the client between two queries (PostgreSQL crashed, a failover, a cut network)
    // would then emit an unhandled 'error' and take the whole process down. So we listen for as
    // long as we hold it, and a client that failed this way is destroyed, never reused.
    /** @type {unknown} */
    let failure;
    /** @param {Error} err */
    const onError = (err) => {
      failure ??= err;
    };
    client.on('error', onError);
    try {
      return await fn(client);
    } catch (err) {
      failure ??= err;
      throw err;
    } finally {
      client.off('error', onError);
      // A client whose statement failed for its own reason is fine; one that may have lost its
      // connection is destroyed rather than lent again.
      client.release(failure !== undefined && isTransient(failure) ? /** @type {Error} */ (failure) : undefined);
    }
  }

  /** @type {Database['transaction']} */
  function transaction(fn) {
    return withClient(async (client) => {
      await client.query('BEGIN');
      try {
        const result = await fn(client);
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      }
    });
  }

  async function isReady() {
    try {
      const { rows } = await pool.query("SELECT to_regclass('public.users') IS NOT NULL AS ready");
      return rows[0].ready === true;
    } catch {
      return false;
    }
  }

  /** @type {Promise<boolean> | undefined} */
  let probing;
  /**
   * Does the database answer, on a connection other than the one that failed? Concurrent callers
   * share one probe: a failing group of 300 requests asks once, not 300 times.
   */
  function probe() {
    probing ??= pool
      .query('SELECT 1')
      .then(() => true, () => false)
      .finally(() => {
        probing = undefined;
      });
    return probing;
  }

  /** @type {Database['diagnose']} */
  async function diagnose(err) {
    if (err instanceof DatabaseUnavailableError) return 'unavailable';
    if (!isTransient(err)) return 'own';
    return (await probe()) ? 'transient' : 'unavailable';
  }

  return { pool, withClient, transaction, isReady, diagnose, close: () => pool.end() };
}
