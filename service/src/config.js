import os from 'node:os';
import { DATABASE_VARIABLES, databaseRules, databaseUrlFrom } from '@sluice/db/database-url';
import { TRACING_VARIABLES, boolean, defineVariables, integer, loadEnv, milliseconds, oneOf, text, tracingConfigFrom } from '@sluice/env';
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
 * @property {number} admissionBudgetBytes  request body bytes one process serves at once (http/admission-budget.js)
 * @property {number} admissionWaitMs       how long a request that does not fit waits before 503 (0: never waits)
 * @property {import('@sluice/env/tracing').TracingConfig} tracing  OpenTelemetry's OTEL_ variables (@sluice/env/tracing)
 */

const LOG_LEVELS = /** @type {const} */ (['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);
const HOUR_MS = 3_600_000;
const workersParser = integer({ min: 0, max: 256 });

/** Every variable the service reads besides DATABASE_VARIABLES (db/src/database-url.js), declared once. */
export const SERVICE_VARIABLES = defineVariables({
  PORT: { parser: integer({ min: 0, max: 65535 }), default: 3000, description: 'HTTP port (0: any free port)' },
  HOST: {
    parser: text(),
    defaultText: '127.0.0.1, or 0.0.0.0 when INGEST_TOKEN is set',
    description: 'address to listen on: an open write endpoint is never exposed by default',
  },
  INGEST_TOKEN: { parser: text({ trim: false }), description: 'when set, POST /users needs it as a bearer token (Authorization header, compared in constant time); unset: a warning at start-up' },
  DB_POOL_MAX: { parser: integer({ min: 1, max: 1000 }), default: 10, description: 'PostgreSQL connections per process' },
  DB_CONNECT_TIMEOUT_MS: { parser: milliseconds({ min: 1, max: 600_000 }), default: 2000, description: 'how long a request waits for a pooled connection before 503' },
  DB_STATEMENT_TIMEOUT_MS: { parser: milliseconds({ min: 1, max: HOUR_MS }), default: 30_000, description: "server-side statement timeout, set by each transaction (SET LOCAL: never on the connection, so a transaction pooler keeps it); and a client-side guard" },
  DB_LOCK_TIMEOUT_MS: { parser: milliseconds({ min: 1, max: HOUR_MS }), default: 3000, description: "how long a write waits for a row another writer holds (PostgreSQL's lock_timeout, set by each transaction), then 503 lock_timeout with Retry-After" },
  MAX_BATCH_ITEMS: { parser: integer({ min: 1, max: 1_000_000 }), default: 10_000, description: 'users per request; more is 413' },
  MAX_BODY_BYTES: { parser: integer({ min: 2, max: 1024 * 1024 * 1024, unit: 'bytes' }), default: 10 * 1024 * 1024, description: 'body size, decoded (and the compressed size too); more is 413' },
  BODY_READ_TIMEOUT_MS: { parser: milliseconds({ min: 1, max: HOUR_MS }), default: 30_000, description: 'how long a body may take to arrive in full; past it, 408 and the connection closed' },
  MAX_STREAM_BYTES: { parser: integer({ min: 1, max: 2 ** 40, unit: 'bytes' }), default: 1024 * 1024 * 1024, description: 'a streamed body (NDJSON, CSV), decoded; more is 413 and nothing is written' },
  STREAM_IDLE_TIMEOUT_MS: { parser: milliseconds({ min: 1, max: HOUR_MS }), default: 30_000, description: 'how long a streamed body may send nothing (it may take as long as it likes in all); past it, 408 and nothing written' },
  INSERT_CHUNK_ROWS: { parser: integer({ min: 1, max: 100_000 }), default: 1000, description: 'rows per INSERT statement' },
  INSERT_STRATEGY: {
    parser: oneOf(/** @type {(keyof typeof STRATEGIES)[]} */ (Object.keys(STRATEGIES))),
    default: /** @type {keyof typeof STRATEGIES} */ ('format'),
    description: 'format: a pg-format multi-row INSERT of text[] literals; unnest: the same with array parameters; copy: COPY, through a staging table when a chunk meets a stored email',
  },
  GROUP_COMMIT: { parser: boolean, default: true, description: 'small concurrent requests share one statement and one commit; off: each request is its own' },
  GROUP_COMMIT_MAX_ROWS: { parser: integer({ min: 1, max: 100_000 }), default: 1000, description: "rows in one group's statement at most" },
  GROUP_COMMIT_SMALL_ROWS: { parser: integer({ min: 1, max: 100_000 }), default: 100, description: 'a request of at most this many users is written in a group; larger ones go straight' },
  WORKERS: {
    parser: {
      kind: `auto (one per core) or ${workersParser.kind}`,
      parse: (value) => (value.trim() === 'auto' ? os.availableParallelism() : workersParser.parse(value)),
    },
    default: 0,
    description: 'node:cluster workers (0: no cluster); a dead worker is replaced',
  },
  SHUTDOWN_TIMEOUT_MS: { parser: milliseconds({ min: 1, max: HOUR_MS }), default: 25_000, description: 'on SIGTERM, how long in-flight requests may take before exit 1' },
  LOG_LEVEL: { parser: oneOf(LOG_LEVELS), default: 'info', description: 'pino level (silent to mute)' },
  // Body bytes, not memory: each byte of a large body costs several in the heap while it is
  // parsed and written (docs/architecture.md, "Admission control"). The minimum keeps a reserve for small requests.
  // 3 MiB keeps a burst of 10,000-user requests under 256 MiB of RSS on Node 22, whose idle process
  // is 16 MiB larger than Node 20's (4 MiB peaked at 254 to 276 MiB there; docs/benchmarks.md).
  ADMISSION_BUDGET_BYTES: { parser: integer({ min: 64 * 1024, max: 1024 * 1024 * 1024, unit: 'bytes' }), default: 3 * 1024 * 1024, description: 'request body bytes one process serves at once (admission control)' },
  ADMISSION_WAIT_MS: { parser: milliseconds({ min: 0, max: 600_000 }), default: 2000, description: 'how long a request that does not fit the budget waits before 503 (0: never waits)' },
});

/**
 * Reads and checks every variable the service uses, once (the OTEL_ ones of tracing too: the
 * tracing SDK is built from what this returns). A bad value stops start-up with a message naming
 * every variable at fault, rather than failing later on the first request.
 *
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {Config}
 */
export function loadConfig(env = process.env) {
  const v = loadEnv({ ...DATABASE_VARIABLES, ...SERVICE_VARIABLES, ...TRACING_VARIABLES }, env, databaseRules);
  return {
    databaseUrl: databaseUrlFrom(v),
    port: v.PORT,
    // Without a token the write endpoint is open to whoever reaches it: loopback unless asked otherwise.
    host: v.HOST ?? (v.INGEST_TOKEN ? '0.0.0.0' : '127.0.0.1'),
    ingestToken: v.INGEST_TOKEN,
    dbPoolMax: v.DB_POOL_MAX,
    dbConnectTimeoutMs: v.DB_CONNECT_TIMEOUT_MS,
    dbStatementTimeoutMs: v.DB_STATEMENT_TIMEOUT_MS,
    dbLockTimeoutMs: v.DB_LOCK_TIMEOUT_MS,
    maxBatchItems: v.MAX_BATCH_ITEMS,
    maxBodyBytes: v.MAX_BODY_BYTES,
    bodyReadTimeoutMs: v.BODY_READ_TIMEOUT_MS,
    maxStreamBytes: v.MAX_STREAM_BYTES,
    streamIdleTimeoutMs: v.STREAM_IDLE_TIMEOUT_MS,
    insertChunkRows: v.INSERT_CHUNK_ROWS,
    insertStrategy: v.INSERT_STRATEGY,
    groupCommit: v.GROUP_COMMIT,
    groupCommitMaxRows: v.GROUP_COMMIT_MAX_ROWS,
    groupCommitSmallRows: v.GROUP_COMMIT_SMALL_ROWS,
    workers: v.WORKERS,
    shutdownTimeoutMs: v.SHUTDOWN_TIMEOUT_MS,
    logLevel: v.LOG_LEVEL,
    admissionBudgetBytes: v.ADMISSION_BUDGET_BYTES,
    admissionWaitMs: v.ADMISSION_WAIT_MS,
    tracing: tracingConfigFrom(v),
  };
}
