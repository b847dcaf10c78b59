import { ConfigError } from './errors.js';

/**
 * @typedef {object} FeederConfig
 * @property {string} serviceUrl          base URL of the sluice service
 * @property {string | undefined} ingestToken
 * @property {string | undefined} ingestTokenSecretArn  Secrets Manager secret holding the token (AWS)
 * @property {number} postChunkItems      users per POST /users (default 1000)
 * @property {number} postConcurrency     POSTs in flight at once (default 4)
 * @property {number} requestTimeoutMs    one POST's limit (default 30000)
 * @property {number} retryBaseMs         first backoff step (default 200)
 * @property {number} retryMaxMs          backoff cap (default 5000)
 * @property {number} safetyMarginMs      time kept back from the invocation's deadline (default 3000)
 * @property {'ignore' | 'merge'} conflictResolution  what the service does with a stored email, unless a
 *   message's `resolution` attribute says otherwise (default ignore)
 */

/**
 * @param {NodeJS.ProcessEnv} env
 * @param {string} name @param {number} fallback @param {number} min @param {number} max
 */
export function intVar(env, name, fallback, min = 1, max = Number.MAX_SAFE_INTEGER) {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(name, `must be a whole number, got ${JSON.stringify(raw)}`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${value}`);
  return value;
}

/**
 * @template {string} T
 * @param {NodeJS.ProcessEnv} env @param {string} name @param {readonly T[]} allowed @param {T} fallback
 * @returns {T}
 */
export function oneOfVar(env, name, allowed, fallback) {
  const raw = env[name]?.trim() || fallback;
  if (!allowed.includes(/** @type {T} */ (raw))) throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got ${JSON.stringify(raw)}`);
  return /** @type {T} */ (raw);
}

/** @param {NodeJS.ProcessEnv} env @param {string} name */
export function urlVar(env, name) {
  const raw = env[name]?.trim();
  if (!raw) throw new ConfigError(name, 'is required');
  try {
    const url = new URL(raw);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error();
  } catch {
    throw new ConfigError(name, `must be an http(s) URL, got ${JSON.stringify(raw)}`);
  }
  return raw.replace(/\/+$/, '');
}

/**
 * Every variable the handler reads, parsed and checked once; a bad one fails the cold start with
 * the variable's name.
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {FeederConfig}
 */
export function loadFeederConfig(env = process.env) {
  const ingestTokenSecretArn = env.INGEST_TOKEN_SECRET_ARN?.trim() || undefined;
  if (ingestTokenSecretArn && env.INGEST_TOKEN) throw new ConfigError('INGEST_TOKEN_SECRET_ARN', 'and INGEST_TOKEN are both set: give the token one way');
  if (ingestTokenSecretArn && !/^arn:aws[\w-]*:secretsmanager:/.test(ingestTokenSecretArn)) {
    throw new ConfigError('INGEST_TOKEN_SECRET_ARN', `must be a Secrets Manager secret ARN, got ${JSON.stringify(ingestTokenSecretArn)}`);
  }
  return {
    serviceUrl: urlVar(env, 'SERVICE_URL'),
    ingestToken: env.INGEST_TOKEN || undefined,
    ingestTokenSecretArn,
    postChunkItems: intVar(env, 'POST_CHUNK_ITEMS', 1000, 1, 10_000),
    postConcurrency: intVar(env, 'POST_CONCURRENCY', 4, 1, 64),
    requestTimeoutMs: intVar(env, 'REQUEST_TIMEOUT_MS', 30_000, 100, 900_000),
    retryBaseMs: intVar(env, 'RETRY_BASE_MS', 200, 1, 60_000),
    retryMaxMs: intVar(env, 'RETRY_MAX_MS', 5_000, 1, 300_000),
    safetyMarginMs: intVar(env, 'SAFETY_MARGIN_MS', 3_000, 0, 300_000),
    conflictResolution: oneOfVar(env, 'CONFLICT_RESOLUTION', ['ignore', 'merge'], 'ignore'),
  };
}
