import {
  defineVariables,
  loadEnv,
  matching,
  milliseconds,
  integer,
  oneOf,
  text,
  url,
} from '@sluice/env';

/**
 * Each field is its variable's (FEEDER_VARIABLES describes them).
 * @typedef {{ serviceUrl: string, ingestToken: string | undefined,
 *   ingestTokenSecretArn: string | undefined, ingestClientName: string, postChunkItems: number,
 *   postConcurrency: number, requestTimeoutMs: number, retryBaseMs: number, retryMaxMs: number,
 *   safetyMarginMs: number, conflictResolution: 'ignore' | 'merge',
 *   invalidUsers: import('./records.js').InvalidUsers }} FeederConfig
 */

export const FEEDER_VARIABLES = defineVariables({
  SERVICE_URL: {
    parser: url({ protocols: ['http', 'https'], trimSlashes: true }),
    required: true,
    description: 'base URL of the sluice service',
  },
  INGEST_TOKEN: { parser: text({ trim: false }), description: "the service's bearer token" },
  INGEST_TOKEN_SECRET_ARN: {
    parser: matching(/^arn:aws[\w-]*:secretsmanager:/, 'a Secrets Manager secret ARN'),
    description:
      'on AWS: the Secrets Manager secret holding the token, instead of INGEST_TOKEN: ' +
      "plain text, or a JSON object of client name → token (the service's " +
      'INGEST_TOKENS form); read at a cold start and again when the service answers 401',
  },
  INGEST_CLIENT_NAME: {
    parser: text(),
    default: 'feeder',
    description:
      "the feeder's client name: its entry in a secret that holds a JSON object of name → token",
  },
  POST_CHUNK_ITEMS: {
    parser: integer({ min: 1, max: 10_000 }),
    default: 1000,
    description: 'users per POST /users',
  },
  POST_CONCURRENCY: {
    parser: integer({ min: 1, max: 64 }),
    default: 4,
    description: 'POSTs in flight at once',
  },
  REQUEST_TIMEOUT_MS: {
    parser: milliseconds({ min: 100, max: 900_000 }),
    default: 30_000,
    description: "one POST's limit",
  },
  RETRY_BASE_MS: {
    parser: milliseconds({ min: 1, max: 60_000 }),
    default: 200,
    description: 'the first backoff step',
  },
  RETRY_MAX_MS: {
    parser: milliseconds({ min: 1, max: 300_000 }),
    default: 5_000,
    description: "the backoff's cap",
  },
  SAFETY_MARGIN_MS: {
    parser: milliseconds({ min: 0, max: 300_000 }),
    default: 3_000,
    description: "time kept back from an invocation's deadline",
  },
  CONFLICT_RESOLUTION: {
    parser: oneOf(['ignore', 'merge']),
    default: 'ignore',
    description:
      'ignore (skip stored emails) or merge (update them), ' +
      "unless a message's resolution attribute says otherwise",
  },
  INVALID_USERS: {
    parser: oneOf(['quarantine', 'refuse']),
    default: 'quarantine',
    description:
      'quarantine (the service sets an invalid user aside, Prefer: invalid=quarantine, ' +
      'and stores the rest of its message) or refuse (the message fails, to the ' +
      "dead-letter queue), unless a message's invalid attribute says otherwise",
  },
  // Read by Powertools' Logger itself; declared so that --help and the doc say so.
  POWERTOOLS_LOG_LEVEL: {
    parser: text(),
    defaultText: 'INFO',
    description: "Powertools' Logger level: TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL or SILENT",
  },
});

/** @param {NodeJS.ProcessEnv} [env] @returns {FeederConfig} */
export function loadFeederConfig(env = process.env) {
  const v = loadEnv(FEEDER_VARIABLES, env, (values) =>
    values.INGEST_TOKEN_SECRET_ARN && values.INGEST_TOKEN
      ? [
          {
            variable: 'INGEST_TOKEN_SECRET_ARN',
            problem: 'and INGEST_TOKEN are both set: give the token one way',
          },
        ]
      : [],
  );
  return {
    serviceUrl: v.SERVICE_URL,
    ingestToken: v.INGEST_TOKEN,
    ingestTokenSecretArn: v.INGEST_TOKEN_SECRET_ARN,
    ingestClientName: v.INGEST_CLIENT_NAME,
    postChunkItems: v.POST_CHUNK_ITEMS,
    postConcurrency: v.POST_CONCURRENCY,
    requestTimeoutMs: v.REQUEST_TIMEOUT_MS,
    retryBaseMs: v.RETRY_BASE_MS,
    retryMaxMs: v.RETRY_MAX_MS,
    safetyMarginMs: v.SAFETY_MARGIN_MS,
    conflictResolution: v.CONFLICT_RESOLUTION,
    invalidUsers: v.INVALID_USERS,
  };
}
