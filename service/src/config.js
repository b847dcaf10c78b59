import os from 'node:os';
import { databaseUrlFromEnv } from '@sluice/db/database-url';
import { ConfigError } from './errors.js';
import { STRATEGIES } from './users/user-repository.js';

/**
 * @typedef {object} Config
 * @property {string | undefined} databaseUrl
 * @property {number} port
 * @property {string} host
 * @property {string | undefined} ingestToken
 * @property {number} dbPoolMax
 * @property {number} dbConnectTimeoutMs  how long a request waits for a pool connection before 503
 * @property {number} dbStatementTimeoutMs
 * @property {number} dbLockTimeoutMs     how long a write waits for a row another writer holds before 503
 * @property {number} maxBatchItems
 * @property {number} maxBodyBytes
 * @property {number} bodyReadTimeoutMs   how long a request body may take to arrive before 408
 * @property {number} maxStreamBytes      a streamed body (NDJSON, CSV) decoded, at most
 * @property {number} streamIdleTimeoutMs  how long a streamed body may send nothing before 408
 * @property {number} insertChunkRows
 * @property {import('./users/user-repository.js').Strategy} insertStrategy
 * @property {boolean} groupCommit        small concurrent requests share one INSERT and one commit
 * @property {number} groupCommitMaxRows  rows in one group's statement at most
 * @property {number} groupCommitSmallRows  a request of at most this many users is grouped
 * @property {number} workers             0: no cluster, this process serves
 * @property {number} shutdownTimeoutMs
 * @property {string} logLevel
 * @property {number} admissionBudgetBytes  request body bytes one process serves at once (http/admission.js)
 * @property {number} admissionWaitMs       how long a request that does not fit waits before 503 (0: never waits)
 */

const DEFAULT_ADMISSION_BUDGET_BYTES = 4 * 1024 * 1024;
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * Reads and checks every variable the service uses, once. A bad value stops start-up with a
 * message naming the variable, rather than failing later on the first request.
 *
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {Config}
 */
export function loadConfig(env = process.env) {
  const int = (/** @type {string} */ name, /** @type {number} */ fallback, min = 1, max = Number.MAX_SAFE_INTEGER) => {
    const raw = env[name];
    if (raw === undefined || raw.trim() === '') return fallback;
    if (!/^\d+$/.test(raw.trim())) throw new ConfigError(name, `must be a whole number, got ${JSON.stringify(raw)}`);
    const value = Number(raw);
    if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
    return value;
  };
  const oneOf = (/** @type {string} */ name, /** @type {readonly string[]} */ allowed, /** @type {string} */ fallback) => {
    const raw = (env[name] ?? '').trim() || fallback;
    if (!allowed.includes(raw)) throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got ${JSON.stringify(raw)}`);
    return raw;
  };

  const onOff = (/** @type {string} */ name, /** @type {boolean} */ fallback) => {
    const raw = (env[name] ?? '').trim().toLowerCase();
    if (raw === '') return fallback;
    if (['on', 'true', '1'].includes(raw)) return true;
    if (['off', 'false', '0'].includes(raw)) return false;
    throw new ConfigError(name, `must be on or off, got ${JSON.stringify(env[name])}`);
  };

  const databaseUrl = databaseUrlFromEnv(env);
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL', 'must be a postgres:// or postgresql:// URL');
  }
  const ingestToken = env.INGEST_TOKEN || undefined;

  const rawWorkers = (env.WORKERS ?? '').trim();
  const workers = rawWorkers === 'auto' ? os.availableParallelism() : int('WORKERS', 0, 0, 256);

  return {
    databaseUrl,
    port: int('PORT', 3000, 0, 65535),
    // Without a token the write endpoint is open to whoever reaches it: loopback unless asked otherwise.
    host: env.HOST?.trim() || (ingestToken ? '0.0.0.0' : '127.0.0.1'),
    ingestToken,
    dbPoolMax: int('DB_POOL_MAX', 10, 1, 1000),
    dbConnectTimeoutMs: int('DB_CONNECT_TIMEOUT_MS', 2000, 1, 600_000),
    dbStatementTimeoutMs: int('DB_STATEMENT_TIMEOUT_MS', 30_000, 1, 3_600_000),
    dbLockTimeoutMs: int('DB_LOCK_TIMEOUT_MS', 3000, 1, 3_600_000),
    maxBatchItems: int('MAX_BATCH_ITEMS', 10_000, 1, 1_000_000),
    maxBodyBytes: int('MAX_BODY_BYTES', 10 * 1024 * 1024, 2, 1024 * 1024 * 1024),
    bodyReadTimeoutMs: int('BODY_READ_TIMEOUT_MS', 30_000, 1, 3_600_000),
    maxStreamBytes: int('MAX_STREAM_BYTES', 1024 * 1024 * 1024, 1, 2 ** 50),
    streamIdleTimeoutMs: int('STREAM_IDLE_TIMEOUT_MS', 30_000, 1, 3_600_000),
    insertChunkRows: int('INSERT_CHUNK_ROWS', 1000, 1, 100_000),
    insertStrategy: /** @type {Config['insertStrategy']} */ (oneOf('INSERT_STRATEGY', Object.keys(STRATEGIES), 'format')),
    groupCommit: onOff('GROUP_COMMIT', true),
    groupCommitMaxRows: int('GROUP_COMMIT_MAX_ROWS', 1000, 1, 100_000),
    groupCommitSmallRows: int('GROUP_COMMIT_SMALL_ROWS', 100, 1, 100_000),
    workers,
    shutdownTimeoutMs: int('SHUTDOWN_TIMEOUT_MS', 25_000, 1, 3_600_000),
    logLevel: oneOf('LOG_LEVEL', LOG_LEVELS, 'info'),
    // Body bytes, not memory: each byte of a large body costs several in the heap while it is
    // parsed and written (docs/architecture.md, "Admission control"). The minimum keeps a reserve for small requests.
    admissionBudgetBytes: int('ADMISSION_BUDGET_BYTES', DEFAULT_ADMISSION_BUDGET_BYTES, 64 * 1024, 1024 * 1024 * 1024),
    admissionWaitMs: int('ADMISSION_WAIT_MS', 2000, 0, 600_000),
  };
}
