import os from 'node:os';
import { readFileSync } from 'node:fs';
import { DATABASE_VARIABLES, databaseRules, databaseUrlFrom } from '@sluice/db/database-url';
import {
  ConfigError,
  boolean,
  decimal,
  defineVariables,
  frozenWords,
  integer,
  loadEnv,
  matching,
  milliseconds,
  oneOf,
  text,
  TRACING_VARIABLES,
  tracingConfigFrom,
  url,
} from '@sluice/env';
import { parseNamedTokens } from '@sluice/env/named-tokens';
import { ANONYMOUS_ROLE } from './auth/refusals.js';
import { DEFAULT_CLIENT, mergeNamedTokens } from './auth/token-set.js';
import { INSERT_STRATEGIES } from './users/insert-strategies.js';

/**
 * The service's configuration, each value as SERVICE_VARIABLES describes its variable.
 * @typedef {{ databaseUrl: string | undefined, port: number, host: string, auth: Auth,
 *   dbPoolMax: number, dbConnectTimeoutMs: number, dbStatementTimeoutMs: number,
 *   dbLockTimeoutMs: number, maxBatchItems: number, maxBodyBytes: number,
 *   bodyReadTimeoutMs: number, maxStreamBytes: number, streamIdleTimeoutMs: number,
 *   insertChunkRows: number, insertStrategy: import('./users/insert-strategies.js').InsertStrategy,
 *   groupCommit: boolean, metricsPublic: boolean, groupCommitMaxRows: number,
 *   groupCommitSmallRows: number, workers: number, shutdownTimeoutMs: number, logLevel: string,
 *   admissionBudgetBytes: number, admissionWaitMs: number, idempotencyKeyTtlSeconds: number,
 *   quarantineClientMaxBytes: number, quarantineRetentionDays: number,
 *   erasureKey: string | undefined, erasureKeyFile: string | undefined,
 *   tracing: import('@sluice/env/tracing').TracingConfig }} Config
 */
/**
 * @typedef {import('./auth/token-source.js').TokenSourceConfig & {
 *   jwt: import('./auth/jwt.js').JwtConfig | undefined,
 *   jwtLimits: import('@sluice/env/named-tokens').ClientLimits | undefined }} Auth
 */

/**
 * INGEST_TOKENS: checked whole at start-up (@sluice/env's named-tokens.js), its problems naming
 * clients, never tokens.
 */
const namedTokens = {
  kind:
    'a JSON object of client name → token, or → {"token", ' +
    '"erase", "rate", "burst", "weight", "maxInFlightBytes"}',
  parse: parseNamedTokens,
};
/** A comma-separated list of words, none empty. */
const wordList = {
  kind: 'a comma-separated list',
  parse: (/** @type {string} */ value) => {
    const words = value.split(',').map((w) => w.trim());
    if (words.some((w) => w === ''))
      throw new TypeError(
        `must be a comma-separated list of non-empty values, got ${JSON.stringify(value)}`,
      );
    return words;
  },
};
/** PostgREST asks the same of its jwt-secret: HS256 with a shorter secret can be brute-forced. */
export const JWT_SECRET_MIN_LENGTH = 32;
const JWT_ONLY = frozenWords([
  'JWT_AUDIENCE',
  'JWT_ISSUER',
  'JWT_ROLES',
  'JWT_ERASE_ROLES',
  'JWT_CLIENT_RATE',
  'JWT_CLIENT_BURST',
  'JWT_CLIENT_MAX_IN_FLIGHT_BYTES',
]);

const LOG_LEVELS = frozenWords(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);
const HOUR_MS = 3_600_000;
const workersParser = integer({ min: 0, max: 256 });

/**
 * Every variable the service reads besides DATABASE_VARIABLES (db/src/database-url.js), declared
 * once.
 */
/** An erasure key's least length: 32 characters, as many bytes as the hash. */
export const ERASURE_KEY_MIN_LENGTH = 32;

export const SERVICE_VARIABLES = defineVariables({
  PORT: {
    parser: integer({ min: 0, max: 65535 }),
    default: 3000,
    description: 'HTTP port (0: any free port)',
  },
  HOST: {
    parser: text(),
    defaultText: '127.0.0.1, or 0.0.0.0 when a token or a JWT is required',
    description: 'address to listen on: an open write endpoint is never exposed by default',
  },
  INGEST_TOKEN: {
    parser: text({ trim: false }),
    description:
      `when set, POST /users accepts it as a bearer token (Authorization ` +
      `header, compared in constant time), the client named ${DEFAULT_CLIENT}, which ` +
      `may erase users too (the one operator credential); ` +
      `no credential of any kind set: a warning at start-up`,
  },
  INGEST_TOKENS: {
    parser: namedTokens,
    description:
      'clients and their bearer tokens: any of them is accepted (compared in constant ' +
      "time), so a new token is added before the old one is removed; the client's name, " +
      "never its token, goes in the access log, the request's span and a metric label. " +
      'A client given as an object may be given the right to erase users beside its token ' +
      '("erase": true; without it, a request that erases is 403 forbidden), and ' +
      'declares its limits there too, read again with ' +
      'it: rate (users a second, for the whole deployment: every process leases its share ' +
      'in PostgreSQL; over it, 429 with Retry-After and RateLimit headers before the body ' +
      'is read) and burst (users at once, default one second of the rate), weight (its share ' +
      "of a process's admission budget against the other clients waiting, default 1), " +
      'maxInFlightBytes (body bytes it may hold at once in a process); unset, no rate, ' +
      'equal weights',
  },
  INGEST_TOKENS_FILE: {
    parser: text(),
    description:
      'a file holding that JSON object instead of INGEST_TOKENS, read again every ' +
      'INGEST_TOKENS_REFRESH_MS: a client is added, rotated or revoked by rewriting ' +
      'it, with no restart (a bad rewrite is logged and the tokens in force stay)',
  },
  INGEST_TOKENS_SECRET_ARN: {
    parser: matching(/^arn:aws[\w-]*:secretsmanager:/, 'a Secrets Manager secret ARN'),
    description:
      'on AWS: a Secrets Manager secret holding that JSON object instead, read ' +
      'again every INGEST_TOKENS_REFRESH_MS; the clients of its AWSCURRENT and ' +
      'AWSPENDING versions are both accepted, so a rotation needs no restart',
  },
  INGEST_TOKENS_REFRESH_MS: {
    parser: milliseconds({ min: 100, max: HOUR_MS }),
    defaultText: '1000 for a file, 60000 for a secret',
    description: 'how often INGEST_TOKENS_FILE or INGEST_TOKENS_SECRET_ARN is read again',
  },
  JWT_SECRET: {
    parser: text({ trim: false }),
    description:
      `bearer JWTs signed with HS256 and this secret (at ` +
      `least ${JWT_SECRET_MIN_LENGTH} characters) are accepted`,
  },
  JWT_JWKS_URL: {
    parser: url({ protocols: ['http', 'https'] }),
    description:
      'instead of JWT_SECRET: bearer JWTs signed with an asymmetric key (RS, ' +
      'PS, ES, EdDSA) of this JSON Web Key Set are accepted; keys cached, ' +
      'fetched again on an unknown kid (at most every 30 s) and every 10 minutes',
  },
  JWT_JWKS_TIMEOUT_MS: {
    parser: milliseconds({ min: 100, max: 4000 }),
    default: 2000,
    description:
      'one fetch of the key set, at most: a key host that ' +
      'does not answer costs a request this long, then 401',
  },
  JWT_AUDIENCE: { parser: text(), description: "when set, a JWT's aud must hold it" },
  JWT_ISSUER: { parser: text(), description: "when set, a JWT's iss must be it" },
  JWT_ROLE_CLAIM: {
    parser: text(),
    default: 'role',
    description: "the claim that must grant writing (PostgREST's role claim)",
  },
  JWT_ROLES: {
    parser: wordList,
    defaultText: 'any role but anon',
    description:
      'the values of JWT_ROLE_CLAIM that grant writing; unset, any but anon ' +
      "(Supabase's public anonymous key), and a JWT without the claim is refused",
  },
  JWT_ERASE_ROLES: {
    parser: wordList,
    description:
      'the values of JWT_ROLE_CLAIM that grant erasing users besides writing (each one ' +
      'a role that grants writing); a JWT of another role that erases is 403 forbidden; ' +
      'unset, no JWT may erase',
  },
  JWT_CLIENT_CLAIM: {
    parser: text(),
    default: 'sub',
    description:
      'the claim that names the client in the access log and the span (the ' +
      'metric label of every JWT is jwt: a subject is not a bounded label)',
  },
  JWT_CLIENT_RATE: {
    parser: decimal({ min: 0.001, max: 1e9 }),
    description:
      "every JWT client's rate, in users a second, each client (by " +
      'JWT_CLIENT_CLAIM) its own token bucket for the whole deployment ' +
      '(every process leases its share in PostgreSQL): over it, 429 with ' +
      'Retry-After and RateLimit headers before the body is read (a static ' +
      "token's client declares its own in INGEST_TOKENS); unset, no rate",
  },
  JWT_CLIENT_BURST: {
    parser: decimal({ min: 1, max: 1e9 }),
    defaultText: 'JWT_CLIENT_RATE (one second of it)',
    description: 'users a JWT client may send at once within JWT_CLIENT_RATE',
  },
  JWT_CLIENT_WEIGHT: {
    parser: decimal({ min: 0.001, max: 1000 }),
    default: 1,
    description:
      "every JWT client's weight in fair admission: its share " +
      'of the admission budget against the other clients waiting',
  },
  JWT_CLIENT_MAX_IN_FLIGHT_BYTES: {
    parser: integer({ min: 1024, max: 2 ** 40, unit: 'bytes' }),
    description:
      'request body bytes one JWT client may hold at once in a ' +
      'process (admission control); unset, its fair share alone',
  },
  DB_POOL_MAX: {
    parser: integer({ min: 1, max: 1000 }),
    default: 10,
    description: 'PostgreSQL connections per process',
  },
  DB_CONNECT_TIMEOUT_MS: {
    parser: milliseconds({ min: 1, max: 600_000 }),
    default: 2000,
    description: 'how long a request waits for a pooled connection before 503',
  },
  DB_STATEMENT_TIMEOUT_MS: {
    parser: milliseconds({ min: 1, max: HOUR_MS }),
    default: 30_000,
    description:
      'server-side statement timeout, set by each transaction (SET LOCAL: never on ' +
      'the connection, so a transaction pooler keeps it); and a client-side guard',
  },
  DB_LOCK_TIMEOUT_MS: {
    parser: milliseconds({ min: 1, max: HOUR_MS }),
    default: 3000,
    description:
      "how long a write waits for a row another writer holds (PostgreSQL's " +
      'lock_timeout, set by each transaction), then 503 lock_timeout with Retry-After',
  },
  MAX_BATCH_ITEMS: {
    parser: integer({ min: 1, max: 1_000_000 }),
    default: 10_000,
    description: 'users per request; more is 413',
  },
  MAX_BODY_BYTES: {
    parser: integer({ min: 2, max: 1024 * 1024 * 1024, unit: 'bytes' }),
    default: 10 * 1024 * 1024,
    description: 'body size, decoded (and the compressed size too); more is 413',
  },
  BODY_READ_TIMEOUT_MS: {
    parser: milliseconds({ min: 1, max: HOUR_MS }),
    default: 30_000,
    description:
      'how long a body may take to arrive in full; past it, 408 and the connection closed',
  },
  MAX_STREAM_BYTES: {
    parser: integer({ min: 1, max: 2 ** 40, unit: 'bytes' }),
    default: 1024 * 1024 * 1024,
    description: 'a streamed body (NDJSON, CSV), decoded; more is 413 and nothing is written',
  },
  STREAM_IDLE_TIMEOUT_MS: {
    parser: milliseconds({ min: 1, max: HOUR_MS }),
    default: 30_000,
    description:
      'how long a streamed body may send nothing (it may take as ' +
      'long as it likes in all); past it, 408 and nothing written',
  },
  INSERT_CHUNK_ROWS: {
    parser: integer({ min: 1, max: 100_000 }),
    default: 1000,
    description: 'rows per INSERT statement',
  },
  INSERT_STRATEGY: {
    parser: oneOf(INSERT_STRATEGIES),
    default: /** @type {import('./users/insert-strategies.js').InsertStrategy} */ ('format'),
    description:
      'format: a pg-format multi-row INSERT of text[] literals; unnest: the same with array ' +
      'parameters; copy: COPY, through a staging table when a chunk meets a stored email',
  },
  GROUP_COMMIT: {
    parser: boolean,
    default: true,
    description:
      'small concurrent requests share one statement and one commit; off: each request is its own',
  },
  GROUP_COMMIT_MAX_ROWS: {
    parser: integer({ min: 1, max: 100_000 }),
    default: 1000,
    description: "rows in one group's statement at most",
  },
  GROUP_COMMIT_SMALL_ROWS: {
    parser: integer({ min: 1, max: 100_000 }),
    default: 100,
    description:
      'a request of at most this many users is written in a group; larger ones go straight',
  },
  WORKERS: {
    parser: {
      kind: `auto (one per core) or ${workersParser.kind}`,
      parse: (value) =>
        value.trim() === 'auto' ? os.availableParallelism() : workersParser.parse(value),
    },
    default: 0,
    description: 'node:cluster workers (0: no cluster); a dead worker is replaced',
  },
  SHUTDOWN_TIMEOUT_MS: {
    parser: milliseconds({ min: 1, max: HOUR_MS }),
    default: 25_000,
    description: 'on SIGTERM, how long in-flight requests may take before exit 1',
  },
  METRICS_PUBLIC: {
    parser: boolean,
    default: false,
    description:
      'GET /metrics answered to every address; off, to loopback only ' +
      '(127.0.0.0/8, ::1) whatever HOST is, since it names clients and ' +
      'shows the load: a scraper on another host or container needs it on',
  },
  LOG_LEVEL: {
    parser: oneOf(LOG_LEVELS),
    default: 'info',
    description: 'pino level (silent to mute)',
  },
  // Body bytes, not memory (a body costs several times its size while parsed and written); the
  // default keeps a burst of large requests within a small container (docs/benchmarks.md).
  ADMISSION_BUDGET_BYTES: {
    parser: integer({ min: 64 * 1024, max: 1024 * 1024 * 1024, unit: 'bytes' }),
    default: 3 * 1024 * 1024,
    description: 'request body bytes one process serves at once (admission control)',
  },
  ADMISSION_WAIT_MS: {
    parser: milliseconds({ min: 0, max: 600_000 }),
    default: 2000,
    description:
      'how long a request that does not fit the budget waits before 503 (0: never waits)',
  },
  IDEMPOTENCY_KEY_TTL_SECONDS: {
    parser: integer({ min: 1, max: 30 * 24 * 3600, unit: 'seconds' }),
    default: 24 * 3600,
    description:
      "how long an Idempotency-Key is kept with its request's " +
      'fingerprint and answer (a retry within it gets the first answer); ' +
      'then it is a new key, and the service deletes it in the background',
  },
  QUARANTINE_CLIENT_MAX_BYTES: {
    parser: integer({ min: 1, max: 2 ** 40, unit: 'bytes' }),
    default: 64 * 1024 * 1024,
    description:
      "what one client's items set aside by Prefer: invalid=quarantine may hold in all " +
      "(each item's and its errors' bytes, and 200 more); past it, a request of that " +
      'client that sets an item aside is refused, 400 invalid_batch, nothing written',
  },
  QUARANTINE_RETENTION_DAYS: {
    parser: integer({ min: 1, max: 3650, unit: 'days' }),
    default: 30,
    description:
      'how long an item set aside by Prefer: invalid=quarantine is kept ' +
      'after it was last sent; then the service deletes it in the background',
  },
  ERASURE_KEY: {
    parser: text({ trim: false }),
    description:
      `the secret an erased email's tombstone is keyed by (HMAC-SHA-256; at least ` +
      `${ERASURE_KEY_MIN_LENGTH} characters, the same for every process, never stored in ` +
      'the database): without it (or ERASURE_KEY_FILE) an erasure is refused, 503 ' +
      'erasure_key_missing; npm start makes one beside the embedded data. A new key forgets ' +
      'the erasures made under the old one (docs/operations.md)',
  },
  ERASURE_KEY_FILE: {
    parser: text(),
    description: 'a file holding ERASURE_KEY instead (read at start-up; a final newline ignored)',
  },
});

/**
 * Every variable read and checked once (OTEL_ too); a bad value stops start-up naming every one at
 * fault.
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {Config}
 */
export function loadConfig(env = process.env) {
  const v = loadEnv(
    { ...DATABASE_VARIABLES, ...SERVICE_VARIABLES, ...TRACING_VARIABLES },
    env,
    (values) => [...databaseRules(values), ...authRules(values), ...erasureRules(values)],
  );
  const auth = authFrom(v);
  return {
    databaseUrl: databaseUrlFrom(v),
    port: v.PORT,
    // Without credentials the write endpoint is open to whoever reaches it: loopback unless asked
    // otherwise.
    host: v.HOST ?? (authRequired(auth) ? '0.0.0.0' : '127.0.0.1'),
    auth,
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
    metricsPublic: v.METRICS_PUBLIC,
    groupCommitMaxRows: v.GROUP_COMMIT_MAX_ROWS,
    groupCommitSmallRows: v.GROUP_COMMIT_SMALL_ROWS,
    workers: v.WORKERS,
    shutdownTimeoutMs: v.SHUTDOWN_TIMEOUT_MS,
    logLevel: v.LOG_LEVEL,
    admissionBudgetBytes: v.ADMISSION_BUDGET_BYTES,
    admissionWaitMs: v.ADMISSION_WAIT_MS,
    idempotencyKeyTtlSeconds: v.IDEMPOTENCY_KEY_TTL_SECONDS,
    quarantineClientMaxBytes: v.QUARANTINE_CLIENT_MAX_BYTES,
    quarantineRetentionDays: v.QUARANTINE_RETENTION_DAYS,
    erasureKey: v.ERASURE_KEY,
    erasureKeyFile: v.ERASURE_KEY_FILE,
    tracing: tracingConfigFrom(v),
  };
}

/** @typedef {ReturnType<typeof loadEnv<typeof SERVICE_VARIABLES>>} ServiceValues */

/**
 * @param {Pick<ServiceValues, 'ERASURE_KEY' | 'ERASURE_KEY_FILE'>} v
 * @returns {{ variable: string, problem: string }[]}
 */
export function erasureRules(v) {
  if (v.ERASURE_KEY !== undefined && v.ERASURE_KEY_FILE !== undefined)
    return [{ variable: 'ERASURE_KEY_FILE', problem: 'and ERASURE_KEY are both set: give one' }];
  if (v.ERASURE_KEY !== undefined && v.ERASURE_KEY.length < ERASURE_KEY_MIN_LENGTH)
    return [
      {
        variable: 'ERASURE_KEY',
        problem: `must be at least ${ERASURE_KEY_MIN_LENGTH} characters long`,
      },
    ];
  return [];
}

/**
 * Checks across the authentication variables: one token source, one kind of JWT key, no JWT
 * setting without a key, a long enough secret, no token of two clients.
 * @param {ServiceValues} v @returns {{ variable: string, problem: string }[]}
 */
function authRules(v) {
  const problems = [];
  const sources = /** @type {const} */ ([
    'INGEST_TOKENS',
    'INGEST_TOKENS_FILE',
    'INGEST_TOKENS_SECRET_ARN',
  ]).filter((name) => v[name] !== undefined);
  if (sources.length > 1)
    problems.push({
      variable: sources[1],
      problem: `and ${sources[0]} are both set: give the named tokens one way`,
    });
  if (v.INGEST_TOKEN !== undefined && v.INGEST_TOKENS !== undefined) {
    try {
      mergeNamedTokens([[{ name: DEFAULT_CLIENT, token: v.INGEST_TOKEN }], v.INGEST_TOKENS]);
      if (v.INGEST_TOKENS.some((t) => t.name === DEFAULT_CLIENT))
        problems.push({
          variable: 'INGEST_TOKENS',
          problem: `names a client ${DEFAULT_CLIENT}, which is INGEST_TOKEN's name: rename it`,
        });
    } catch (err) {
      problems.push({
        variable: 'INGEST_TOKENS',
        problem:
          `${err instanceof Error ? err.message : err} (INGEST_TOKEN ` +
          `is the client ${DEFAULT_CLIENT})`,
      });
    }
  }
  if (v.JWT_SECRET !== undefined && v.JWT_JWKS_URL !== undefined)
    problems.push({
      variable: 'JWT_JWKS_URL',
      problem: 'and JWT_SECRET are both set: verify JWTs with one of them',
    });
  if (v.JWT_SECRET !== undefined && v.JWT_SECRET.length < JWT_SECRET_MIN_LENGTH)
    problems.push({
      variable: 'JWT_SECRET',
      problem: `must be at least ${JWT_SECRET_MIN_LENGTH} characters long`,
    });
  if (v.JWT_CLIENT_BURST !== undefined && v.JWT_CLIENT_RATE === undefined)
    problems.push({
      variable: 'JWT_CLIENT_BURST',
      problem: 'is set, but JWT_CLIENT_RATE is not: a burst is of a rate',
    });
  if (v.JWT_SECRET === undefined && v.JWT_JWKS_URL === undefined) {
    for (const name of JWT_ONLY)
      if (v[name] !== undefined)
        problems.push({
          variable: name,
          problem: 'is set, but neither JWT_SECRET nor JWT_JWKS_URL is: no JWT would be accepted',
        });
  }
  problems.push(...eraseRoleProblems(v));
  return problems;
}

/**
 * An erasing role must grant writing too: a token of one that does not is refused before its
 * right is looked at.
 * @param {ServiceValues} v @returns {{ variable: string, problem: string }[]}
 */
function eraseRoleProblems(v) {
  const writing = v.JWT_ROLES;
  const refused = (v.JWT_ERASE_ROLES ?? []).filter((role) =>
    writing ? !writing.includes(role) : role === ANONYMOUS_ROLE,
  );
  if (refused.length === 0) return [];
  return [
    {
      variable: 'JWT_ERASE_ROLES',
      problem:
        `names ${refused.map((r) => JSON.stringify(r)).join(', ')}, which ` +
        (writing ? 'JWT_ROLES does not name' : 'never grants writing') +
        ': its tokens would be refused, and an erasing role must grant writing too',
    },
  ];
}

/** @param {ServiceValues} v @returns {Auth} */
function authFrom(v) {
  const fromSecret = v.INGEST_TOKENS_SECRET_ARN !== undefined;
  return {
    ingestToken: v.INGEST_TOKEN,
    ingestTokens: v.INGEST_TOKENS,
    ingestTokensFile: v.INGEST_TOKENS_FILE,
    ingestTokensSecretArn: v.INGEST_TOKENS_SECRET_ARN,
    ingestTokensRefreshMs: v.INGEST_TOKENS_REFRESH_MS ?? (fromSecret ? 60_000 : 1000),
    jwt:
      v.JWT_SECRET !== undefined || v.JWT_JWKS_URL !== undefined
        ? {
            secret: v.JWT_SECRET,
            jwksUrl: v.JWT_JWKS_URL,
            jwksTimeoutMs: v.JWT_JWKS_TIMEOUT_MS,
            audience: v.JWT_AUDIENCE,
            issuer: v.JWT_ISSUER,
            roleClaim: v.JWT_ROLE_CLAIM,
            roles: v.JWT_ROLES,
            eraseRoles: v.JWT_ERASE_ROLES ?? [],
            clientClaim: v.JWT_CLIENT_CLAIM,
          }
        : undefined,
    jwtLimits: jwtLimitsFrom(v),
  };
}

/**
 * Every JWT client's limits, when any is set.
 * @param {ServiceValues} v
 * @returns {import('@sluice/env/named-tokens').ClientLimits | undefined}
 */
function jwtLimitsFrom(v) {
  const limits = {
    ...(v.JWT_CLIENT_RATE !== undefined
      ? { rate: v.JWT_CLIENT_RATE, burst: v.JWT_CLIENT_BURST ?? v.JWT_CLIENT_RATE }
      : {}),
    ...(v.JWT_CLIENT_WEIGHT !== 1 ? { weight: v.JWT_CLIENT_WEIGHT } : {}),
    ...(v.JWT_CLIENT_MAX_IN_FLIGHT_BYTES !== undefined
      ? { maxInFlightBytes: v.JWT_CLIENT_MAX_IN_FLIGHT_BYTES }
      : {}),
  };
  return Object.keys(limits).length > 0 ? limits : undefined;
}

/** Whether POST /users needs credentials. @param {Auth} auth */
export const authRequired = (auth) =>
  auth.ingestToken !== undefined ||
  auth.ingestTokens !== undefined ||
  auth.ingestTokensFile !== undefined ||
  auth.ingestTokensSecretArn !== undefined ||
  auth.jwt !== undefined;

// ERASURE_KEY's bytes, from the variable or its file, read once at start-up.
/**
 * @param {{ erasureKey?: string, erasureKeyFile?: string }} config
 * @returns {Buffer | undefined}
 */
export function erasureKeyOf({ erasureKey, erasureKeyFile }) {
  if (erasureKey !== undefined) return Buffer.from(erasureKey);
  if (erasureKeyFile === undefined) return undefined;
  let text;
  try {
    text = readFileSync(erasureKeyFile, 'utf8');
  } catch (err) {
    const why = /** @type {NodeJS.ErrnoException} */ (err).code ?? 'unreadable';
    throw new ConfigError('ERASURE_KEY_FILE', `cannot be read (${why})`);
  }
  const key = text.endsWith('\n') ? text.slice(0, -1) : text;
  if (key.length < ERASURE_KEY_MIN_LENGTH)
    throw new ConfigError(
      'ERASURE_KEY_FILE',
      `must hold at least ${ERASURE_KEY_MIN_LENGTH} characters`,
    );
  return Buffer.from(key);
}
