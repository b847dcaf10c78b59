// The service: reads the configuration, then either runs the cluster primary or serves requests
// (server.js is the entry). Tracing is made here, from the configuration, when this process serves.
import cluster from 'node:cluster';
import { createCommand } from '@sluice/db/command-line';
import { DATABASE_VARIABLES } from '@sluice/db/database-url';
import { TRACING_VARIABLES, environmentHelp } from '@sluice/env';
import { createApp } from './app.js';
import {
  CANNOT_LISTEN_EXIT_CODE,
  askPrimaryForMetrics,
  runPrimary,
  shareWorkerMetrics,
} from './cluster.js';
import { startAuthentication } from './auth/start-auth.js';
import { SERVICE_VARIABLES, authRequired, loadConfig } from './config.js';
import { createDatabase } from './db/database.js';
import { checkDatabase } from './db/start-problems.js';
import { ConfigError } from './errors.js';
import { checkCanListen, listenProblem } from './http/listen-problem.js';
import { createHttpServer } from './http/node-server.js';
import { createLogger } from './logger.js';
import { createMetrics } from './metrics.js';
import { NO_TRACING, startTracing } from './tracing/tracing.js';

/**
 * Serves HTTP in this process until SIGTERM or SIGINT, then stops accepting, lets in-flight
 * requests finish, closes the pool and exits 0.
 *
 * @param {import('./config.js').Config & { databaseUrl: string }} config
 * @param {import('pino').Logger} logger
 * @param {import('./tracing/tracing.js').Tracing} tracing
 */
async function serve(config, logger, tracing) {
  const auth = await authenticationOrExit(config, logger);
  const db = createDatabase(config, logger, tracing);
  const metrics = createMetrics(db);
  const inCluster = cluster.isWorker;
  if (inCluster) shareWorkerMetrics(metrics.registry);
  const app = createApp({
    config,
    db,
    logger,
    metrics,
    auth,
    renderMetrics: inCluster ? askPrimaryForMetrics : undefined,
    tracing,
  });

  const server = createHttpServer(tracing.tracedRequests(app));
  server.once('error', (err) => {
    const problem = listenProblem(err, config);
    if (!problem) throw err;
    console.error(`sluice: ${problem}`);
    // A worker that cannot listen is not replaced: the primary stops on this code (cluster.js).
    process.exit(cluster.isWorker ? CANNOT_LISTEN_EXIT_CODE : 1);
  });
  // A deeper accept queue than Node's 511, for bursts of new connections (thousands of load-test
  // VUs).
  server.listen({ port: config.port, host: config.host, backlog: 4096 }, () => {
    const address = /** @type {import('node:net').AddressInfo} */ (server.address());
    logger.info(
      { host: config.host, port: address.port, strategy: config.insertStrategy },
      'listening',
    );
  });

  stopOnSignals({ server, config, logger, tracing, auth, db, app });
}

/**
 * On SIGTERM or SIGINT: stops accepting, lets in-flight requests finish (at most
 * SHUTDOWN_TIMEOUT_MS), closes the credentials' watch and the pool, flushes the spans and exits 0.
 * @param {{ server: import('node:http').Server,
 *   config: import('./config.js').Config, logger: import('pino').Logger,
 *   tracing: import('./tracing/tracing.js').Tracing,
 *   auth: import('./auth/start-auth.js').Authentication,
 *   db: import('./db/database.js').Database, app: import('express').Express }} options
 */
function stopOnSignals({ server, config, logger, tracing, auth, db, app }) {
  let stopping = false;
  server.on('request', (_req, res) => {
    // Keep-alive clients learn to reconnect elsewhere instead of reusing a closing socket.
    if (stopping) res.setHeader('Connection', 'close');
  });

  /** @param {NodeJS.Signals} signal */
  async function shutdown(signal) {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: finishing in-flight requests');
    setTimeout(() => {
      logger.error(
        { timeoutMs: config.shutdownTimeoutMs },
        'in-flight requests did not finish in time; exiting',
      );
      process.exit(1);
    }, config.shutdownTimeoutMs).unref();
    const closed = new Promise((resolve) => server.close(resolve));
    const idleCloser = setInterval(() => server.closeIdleConnections(), 100);
    await closed;
    clearInterval(idleCloser);
    auth.close();
    // Its shares of the clients' rates go to the other processes now, not once they expire.
    await app.locals.sharedRates.close();
    await db.close();
    await tracing.flush();
    logger.info('stopped');
    process.exit(0);
  }
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}

/**
 * The credentials read (a token file or secret for the first time), or exit 1 naming the variable
 * that cannot be read.
 * @param {import('./config.js').Config} config @param {import('pino').Logger} logger
 */
async function authenticationOrExit(config, logger) {
  try {
    return await startAuthentication(config.auth, { logger });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    logger.fatal({ variable: err.variable }, `bad configuration: ${err.message}`);
    process.exit(1);
  }
}

/** The configuration, or exit 1 saying what is wrong with it. */
function configOrExit() {
  try {
    return loadConfig();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    console.error(`sluice: bad configuration: ${err.message}`);
    process.exit(1);
  }
}

/**
 * A misconfigured database (password, name, a pooler in statement mode) stops the start here with
 * its fix; one not reachable yet is said the same way, and served 503 until it answers.
 * @param {string} databaseUrl
 * @param {import('./config.js').Config} config @param {import('pino').Logger} logger
 */
async function checkDatabaseOrExit(databaseUrl, config, logger) {
  const problem = await checkDatabase(databaseUrl, config.dbConnectTimeoutMs).catch((err) => {
    logger.warn({ err }, 'the database does not answer yet: serving, 503 until it does');
    return undefined;
  });
  if (problem)
    console.error(
      `sluice: ${problem.line}` +
        `${problem.fatal ? '' : ' (serving meanwhile: 503 until it answers)'}`,
    );
  if (problem?.fatal) process.exit(1);
}

async function main() {
  createCommand(
    'node service/src/server.js',
    'The sluice ingestion service: POST /users into PostgreSQL at ' +
      'DATABASE_URL. Configured by the environment only (service/src/config.js ' +
      'declares each variable; docs/configuration.md lists them).',
    environmentHelp({ ...DATABASE_VARIABLES, ...SERVICE_VARIABLES, ...TRACING_VARIABLES }),
  ).parse();
  const config = configOrExit();
  // A cluster's primary serves no request: it records no span, and loads no tracing SDK.
  const runsWorkers = cluster.isPrimary && config.workers > 0;
  const tracing = runsWorkers ? NO_TRACING : await startTracing(config.tracing);
  const logger = createLogger(config, undefined, tracing);
  process.on('unhandledRejection', (err) => {
    logger.fatal({ err }, 'unhandled rejection');
    process.exit(1);
  });
  const { databaseUrl } = config;
  if (!databaseUrl) {
    logger.fatal(
      'DATABASE_URL is not set: point it at PostgreSQL, ' +
        'or run `npm start`, which starts an embedded one',
    );
    process.exit(1);
  }
  if (cluster.isPrimary) await checkDatabaseOrExit(databaseUrl, config, logger);
  if (cluster.isPrimary && !authRequired(config.auth)) {
    logger.warn(
      'no credentials are configured (INGEST_TOKEN, INGEST_TOKENS, JWT_SECRET, ' +
        '...): POST /users accepts requests from anyone who can reach it',
    );
  }
  if (runsWorkers) {
    // The workers listen through the primary: a busy port is said once here, not by each worker.
    const problem = await checkCanListen(config);
    if (problem) {
      console.error(`sluice: ${problem}`);
      process.exit(1);
    }
    // A token file or secret that cannot be read stops the start here, once, rather than each
    // worker in turn (each then reads its own and keeps it current).
    (await authenticationOrExit(config, logger)).close();
    return runPrimary(config, logger);
  }
  await serve({ ...config, databaseUrl }, logger, tracing);
}

await main();
