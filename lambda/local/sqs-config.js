import {
  ConfigError,
  defineVariables,
  integer,
  loadEnv,
  milliseconds,
  text,
  url,
} from '@sluice/env';
import { DEFAULT_QUEUES } from './elasticmq/elasticmq.js';

/** Where the local runner and the producer find SQS, declared once. */
export const SQS_VARIABLES = defineVariables({
  SQS_ENDPOINT: {
    parser: url({ protocols: ['http', 'https'] }),
    defaultText: "AWS's SQS endpoint for the region",
    description: 'an SQS-compatible endpoint such as ElasticMQ',
  },
  QUEUE_URL: {
    parser: url({ protocols: ['http', 'https'] }),
    required: true,
    description: 'the queue',
  },
  AWS_REGION: {
    parser: text(),
    defaultText: 'AWS_DEFAULT_REGION, else us-east-1',
    description: "the queue's region",
  },
  AWS_DEFAULT_REGION: { parser: text(), description: 'the region when AWS_REGION is unset' },
  AWS_ACCESS_KEY_ID: {
    parser: text(),
    defaultText: 'local stand-ins when SQS_ENDPOINT is set',
    description:
      "credentials (with AWS_SECRET_ACCESS_KEY, read by the AWS SDK); otherwise the SDK's own chain",
  },
});

/** The local event-source runner's own, with Lambda's meaning and the SAM template's defaults. */
export const RUNNER_VARIABLES = defineVariables({
  BATCH_SIZE: {
    parser: integer({ min: 1, max: 10_000 }),
    default: 1000,
    description: 'messages per batch at most',
  },
  BATCH_WINDOW_MS: {
    parser: milliseconds({ min: 0, max: 300_000 }),
    default: 1000,
    description: 'how long a batch may gather',
  },
  RECEIVERS: {
    parser: integer({ min: 1, max: 64 }),
    default: 4,
    description: 'long polls at once',
  },
  RUNNER_CONCURRENCY: {
    parser: integer({ min: 1, max: 64 }),
    default: 2,
    description: 'handler invocations at once',
  },
  FUNCTION_TIMEOUT_MS: {
    parser: milliseconds({ min: 1000, max: 900_000 }),
    default: 60_000,
    description: "one invocation's time limit",
  },
});

/** `npm run elasticmq`'s own: where the SQS emulator of the local walkthrough listens. */
export const ELASTICMQ_VARIABLES = defineVariables({
  ELASTICMQ_PORT: {
    parser: integer({ min: 1, max: 65535 }),
    default: 9324,
    description:
      "ElasticMQ's port on 127.0.0.1 (its endpoint: SQS_ENDPOINT for the runner and the producer)",
  },
});

/**
 * loadEnv, a missing QUEUE_URL told where a queue comes from (`npm run elasticmq`'s).
 * @template {import('@sluice/env/load-env').Declarations} D @param {D} declarations @param {NodeJS.ProcessEnv} env
 */
function loadWithQueueHint(declarations, env) {
  try {
    return loadEnv(declarations, env);
  } catch (err) {
    if (!(err instanceof ConfigError) || env.QUEUE_URL?.trim()) throw err;
    const endpoint = `http://127.0.0.1:${ELASTICMQ_VARIABLES.ELASTICMQ_PORT.default}`;
    const hint = `is required: the queue to use. \`npm run elasticmq\` makes one and prints its URL: SQS_ENDPOINT=${endpoint} QUEUE_URL=${endpoint}/000000000000/${DEFAULT_QUEUES.find((q) => q.deadLetter)?.name}`;
    const problems = err.problems.map((p) =>
      p.variable === 'QUEUE_URL' ? { ...p, problem: hint } : p,
    );
    throw new ConfigError(problems[0].variable, problems[0].problem, problems);
  }
}

/** @param {import('@sluice/env/load-env').Values<typeof SQS_VARIABLES>} v */
function sqsFrom(v) {
  const endpoint = v.SQS_ENDPOINT;
  // With an endpoint of its own (ElasticMQ), any credentials do: stand-ins when none are configured.
  const credentials =
    endpoint && !v.AWS_ACCESS_KEY_ID
      ? { accessKeyId: 'local', secretAccessKey: 'local' }
      : undefined;
  return {
    endpoint,
    queueUrl: v.QUEUE_URL,
    region: v.AWS_REGION ?? v.AWS_DEFAULT_REGION ?? 'us-east-1',
    credentials,
  };
}

/** Where the local runner and the producer find SQS. @param {NodeJS.ProcessEnv} [env] */
export function loadSqsConfig(env = process.env) {
  return sqsFrom(loadWithQueueHint(SQS_VARIABLES, env));
}

/** The local event-source runner's settings. @param {NodeJS.ProcessEnv} [env] */
export function loadRunnerConfig(env = process.env) {
  const v = loadWithQueueHint({ ...SQS_VARIABLES, ...RUNNER_VARIABLES }, env);
  return {
    ...sqsFrom(v),
    batchSize: v.BATCH_SIZE,
    batchWindowMs: v.BATCH_WINDOW_MS,
    receivers: v.RECEIVERS,
    concurrency: v.RUNNER_CONCURRENCY,
    functionTimeoutMs: v.FUNCTION_TIMEOUT_MS,
  };
}
