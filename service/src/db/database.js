import net from 'node:net';
import pg from 'pg';
import { DatabaseUnavailableError } from '../errors.js';
import { createDbWatchdog } from './watchdog.js';
import { classifyFailure } from './failure.js';
import { Lending } from './lending.js';
import { STATEMENT_POOLING } from './start-problems.js';
import { createTransactionSettings, lastResult } from './transaction-settings.js';
import { statementTracer } from '../tracing/pg-spans.js';
import { NO_TRACING } from '../tracing/tracing.js';

const READY = "SELECT to_regclass('public.users') IS NOT NULL AS ready";
// How long a query runs before the watchdog asks whether the database answers; how long a probe
// that found it unreachable is believed (503 at once meanwhile); how long /readyz's verdict holds.
const STALL_MS = 2_000;
const UNREACHABLE_HOLD_MS = 1_000;
export const READINESS_HOLD_MS = 1_000;

/** Which of the database's own time limits ended a failure, if any. @param {unknown} err */
export const timeoutOf = (err) => classifyFailure(err).timeout;

/** @typedef {import('./db-types.js').Database} Database */
/** @typedef {import('./db-types.js').Diagnosis} Diagnosis */
/** @typedef {import('./db-types.js').Readiness} Readiness */
/** @typedef {import('./transaction-settings.js').TransactionSettings} Settings */

/**
 * The one owner of the pool: every statement goes through a lending (lending.js); no connection
 * carries state between transactions, so DATABASE_URL may be a transaction pooler's.
 * @param {{ databaseUrl: string, dbPoolMax: number, dbConnectTimeoutMs: number,
 *   dbStatementTimeoutMs: number, dbLockTimeoutMs?: number }} config
 * @param {import('pino').Logger} logger @param {import('../tracing/tracing.js').Tracing} [tracing]
 * @returns {Database}
 */
export function createDatabase(config, logger, tracing = NO_TRACING) {
  const { connection, pool, lend } = createPool(config, logger, tracing);
  const settings = createTransactionSettings({
    statementTimeoutMs: config.dbStatementTimeoutMs,
    lockTimeoutMs: config.dbLockTimeoutMs,
  });
  const { probe, answers, knownUnreachable } = createProbe(
    connection,
    config.dbConnectTimeoutMs,
    settings,
  );
  const watchdog = createDbWatchdog({
    probe: answers,
    stallMs: STALL_MS,
    onCut: (count) =>
      logger.warn({ connections: count }, 'database unreachable: cut the connections in flight'),
  });
  const withClient = createLender(pool, lend, watchdog, knownUnreachable);
  const readiness = createReadiness({
    pooled: () => checkReadiness(withClient, settings, config.dbConnectTimeoutMs),
    fresh: async () => ({ ready: (await probe()).ready }),
    // Every connection lent, none to be had at once: the pool is busy, which is no reason to wait
    // behind the writes for one (a load balancer would take a busy instance out of service).
    poolBusy: () => pool.idleCount === 0 && pool.totalCount >= config.dbPoolMax,
  });

  /** @type {Database['diagnose']} */
  async function diagnose(err) {
    const { unavailable, timeout, transient } = classifyFailure(err);
    if (unavailable) return 'unavailable';
    if (timeout) return timeout;
    if (!transient) return 'own';
    if (knownUnreachable()) return 'unavailable';
    return (await answers()) ? 'transient' : 'unavailable';
  }

  return {
    pool,
    withClient,
    transaction: createTransaction(withClient, settings),
    settings,
    readiness,
    diagnose,
    isTableLocked: () => isTableLocked(withClient, settings),
    close: () => {
      watchdog.stop();
      return pool.end();
    },
  };
}

/**
 * The pool, each connection on a socket of ours (pg's `stream`), which the watchdog cuts.
 * @param {Parameters<typeof createDatabase>[0]} config @param {import('pino').Logger} logger
 * @param {import('../tracing/tracing.js').Tracing} tracing
 */
function createPool(config, logger, tracing) {
  const connection = {
    connectionString: config.databaseUrl,
    application_name: 'sluice',
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
  };
  // Client-side too: a database that stops answering cannot hang us.
  const readTimeoutMs = config.dbStatementTimeoutMs + 5_000;
  /** @type {WeakMap<pg.ClientBase, net.Socket>} */
  const sockets = new WeakMap();
  /** @param {pg.ClientConfig} clientConfig */
  function OwnSocketClient(clientConfig) {
    const socket = new net.Socket();
    const client = new pg.Client({ ...clientConfig, stream: () => socket });
    sockets.set(client, socket);
    return client;
  }
  const pool = new pg.Pool({
    ...connection,
    Client: /** @type {any} */ (OwnSocketClient),
    max: config.dbPoolMax,
    // Waited for a free connection this long, then 503: never an unbounded queue.
    connectionTimeoutMillis: config.dbConnectTimeoutMs,
    idleTimeoutMillis: 30_000,
    query_timeout: readTimeoutMs,
  });
  // An idle client whose server went away emits here; unhandled, it would crash the process.
  pool.on('error', (err) => logger.warn({ err }, 'idle database connection lost'));
  /** @param {pg.PoolClient} client */
  const lend = (client) => {
    const socket = /** @type {net.Socket} */ (sockets.get(client));
    const trace = tracing.enabled
      ? statementTracer(/** @type {any} */ (client).connectionParameters ?? {}, tracing)
      : undefined;
    return {
      lending: new Lending(client, {
        socket,
        readTimeoutMs,
        statementTimeoutMs: config.dbStatementTimeoutMs,
        trace,
      }),
      cut: (/** @type {Error} */ err) => socket.destroy(err),
    };
  };
  return { connection, pool, lend };
}

/**
 * Lends a client to `fn`, or 503 while the database is known unreachable or none is free in time.
 * @param {pg.Pool} pool @param {ReturnType<typeof createPool>['lend']} lend
 * @param {ReturnType<typeof createDbWatchdog>} watchdog @param {() => boolean} knownUnreachable
 * @returns {Database['withClient']}
 */
function createLender(pool, lend, watchdog, knownUnreachable) {
  return async (fn) => {
    if (knownUnreachable())
      throw new DatabaseUnavailableError(
        new Error('database unreachable (a probe failed within the last second)'),
      );
    let client;
    try {
      client = await pool.connect();
    } catch (err) {
      throw new DatabaseUnavailableError(err);
    }
    return holdClient(client, lend(client), watchdog, fn);
  };
}

/**
 * @param {Database['withClient']} withClient @param {Settings} settings
 * @returns {Database['transaction']}
 */
function createTransaction(withClient, settings) {
  return (fn, { limits, then } = {}) =>
    withClient(async (client) => {
      try {
        // In the try: a failure of BEGIN's round trip (a statement of `then`) leaves it open.
        const answers = await client.begin(
          settings.begin(limits, then),
          limits?.statementTimeoutMs,
        );
        const begun = Array.isArray(answers) ? answers : [answers];
        const result = await fn(client, begun);
        await client.commit();
        return result;
      } catch (err) {
        await client.rollback(err).catch(() => {});
        throw err;
      }
    });
}

/**
 * /readyz's verdict, kept READINESS_HOLD_MS; checked through the pool, or fresh while it is busy.
 * @param {{ pooled: () => Promise<Readiness>, fresh: () => Promise<Readiness>,
 *   poolBusy: () => boolean }} checks
 */
export function createReadiness({ pooled, fresh, poolBusy }) {
  /** @type {{ at: number, verdict: Readiness } | undefined} */ let last;
  /** @type {Promise<Readiness> | undefined} */ let checking;
  return () => {
    if (last && performance.now() - last.at < READINESS_HOLD_MS)
      return Promise.resolve(last.verdict);
    checking ??= (poolBusy() ? fresh() : pooled())
      .catch(() => ({ ready: false }))
      .then((verdict) => {
        last = { at: performance.now(), verdict };
        return verdict;
      })
      .finally(() => {
        checking = undefined;
      });
    return checking;
  };
}

/**
 * BEGIN and the schema's query in one round trip, then ROLLBACK (a pooler in statement mode
 * refuses the BEGIN). @param {Database['withClient']} withClient @param {Settings} settings
 * @param {number} timeoutMs @returns {Promise<Readiness>}
 */
function checkReadiness(withClient, settings, timeoutMs) {
  return withClient(async (client) => {
    try {
      const begun = await client.begin(
        settings.begin({ statementTimeoutMs: timeoutMs }, READY),
        timeoutMs,
        timeoutMs,
      );
      return { ready: lastResult(begun).rows[0]?.ready === true };
    } catch (err) {
      if (classifyFailure(client.failureOf(err)).statementPooling)
        return { ready: false, reason: STATEMENT_POOLING };
      throw err;
    } finally {
      await client.rollback().catch(() => {});
    }
  });
}

/**
 * Does another session hold a lock on users that stops every insert? ROW EXCLUSIVE is what every
 * INSERT takes; NOWAIT refuses at once if a SHARE lock or stronger is held or queued.
 * @param {Database['withClient']} withClient @param {Settings} settings @returns {Promise<boolean>}
 */
function isTableLocked(withClient, settings) {
  return withClient(async (client) => {
    try {
      await client.query({
        text: settings.statement('LOCK TABLE users IN ROW EXCLUSIVE MODE NOWAIT'),
        operation: 'LOCK',
      });
      return false;
    } catch (err) {
      if (timeoutOf(err) === 'lock_timeout') return true;
      throw err;
    }
  }).catch(() => false);
}

/**
 * Does the database answer, the schema in place? On a fresh connection (a pooled one may hang).
 * @param {pg.ClientConfig} connection @param {number} connectTimeoutMs @param {Settings} settings
 */
function createProbe(connection, connectTimeoutMs, settings) {
  /** @type {{ at: number, answered: boolean, ready: boolean } | undefined} */ let lastProbe;
  /** @type {Promise<{ answered: boolean, ready: boolean }> | undefined} */ let probing;
  function probe() {
    probing ??= (async () => {
      const client = new pg.Client({
        ...connection,
        connectionTimeoutMillis: connectTimeoutMs,
        query_timeout: connectTimeoutMs,
      });
      client.on('error', () => {});
      try {
        await client.connect();
        // Through a pooler it waits for a server connection: bounded on both sides.
        const result = await client.query(
          settings.statement(READY, { statementTimeoutMs: connectTimeoutMs }),
        );
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
  const knownUnreachable = () =>
    lastProbe !== undefined &&
    !lastProbe.answered &&
    performance.now() - lastProbe.at < UNREACHABLE_HOLD_MS;
  return { probe, answers, knownUnreachable };
}

/**
 * Runs `fn` with a lending, watched while held; the client destroyed rather than lent again when it
 * may have lost its connection, and its 'error' listened for (unhandled, it would end the process).
 * @template T
 * @param {pg.PoolClient} client @param {ReturnType<ReturnType<typeof createPool>['lend']>} lent
 * @param {ReturnType<typeof createDbWatchdog>} watchdog @param {(client: Lending) => Promise<T>} fn
 * @returns {Promise<T>}
 */
async function holdClient(client, { lending, cut }, watchdog, fn) {
  const onError = (/** @type {Error} */ err) => lending.connectionFailed(err);
  client.on('error', onError);
  const done = watchdog.watch(cut);
  try {
    return await fn(lending);
  } catch (err) {
    throw lending.handOn(err);
  } finally {
    done();
    client.off('error', onError);
    const first = lending.firstFailure();
    client.release(
      first && classifyFailure(first).transient ? /** @type {Error} */ (first.cause) : undefined,
    );
  }
}
