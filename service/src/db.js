import pg from 'pg';
import { DatabaseUnavailableError } from './errors.js';

// Connection-level failures: retrying later can succeed, so they become 503 + Retry-After.
const UNAVAILABLE_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
const UNAVAILABLE_SQLSTATES = new Set([
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, shutting down)
  '53300', // too_many_connections
  '57014', // query_canceled: our statement_timeout fired
  '40P01', // deadlock_detected: the transaction rolled back whole, a retry is safe
]);
const UNAVAILABLE_MESSAGES = /timeout exceeded when trying to connect|Connection terminated|connection error and is not queryable|Query read timeout/i;

/** @param {unknown} err */
export function isUnavailable(err) {
  if (!(err instanceof Error)) return false;
  const code = /** @type {{ code?: string }} */ (err).code ?? '';
  return UNAVAILABLE_ERRNOS.has(code) || UNAVAILABLE_SQLSTATES.has(code) || code.startsWith('08') || UNAVAILABLE_MESSAGES.test(err.message);
}

/** @param {unknown} err */
const classify = (err) => (isUnavailable(err) ? new DatabaseUnavailableError('database unavailable', err) : err);

/**
 * @typedef {object} Database
 * @property {pg.Pool} pool
 * @property {<T>(fn: (client: pg.PoolClient) => Promise<T>) => Promise<T>} withClient
 * @property {<T>(fn: (client: pg.PoolClient) => Promise<T>) => Promise<T>} transaction
 * @property {() => Promise<boolean>} isReady  the database answers and the schema is in place
 * @property {() => Promise<void>} close
 */

/**
 * The one module that owns the pool. Every query goes through a client it lends, so errors are
 * classified (unavailable → 503) in one place.
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
      throw classify(err);
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
      throw classify(err);
    } finally {
      client.off('error', onError);
      client.release(failure !== undefined && isUnavailable(failure) ? /** @type {Error} */ (failure) : undefined);
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

  return { pool, withClient, transaction, isReady, close: () => pool.end() };
}
