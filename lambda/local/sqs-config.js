import { intVar, urlVar } from '../src/config.js';

/**
 * Where the local runner and the producer find SQS. With SQS_ENDPOINT set (ElasticMQ), any
 * credentials do: local stand-ins are used when none are configured.
 * @param {NodeJS.ProcessEnv} [env]
 */
export function loadSqsConfig(env = process.env) {
  const endpoint = env.SQS_ENDPOINT?.trim() || undefined;
  if (endpoint) urlVar(env, 'SQS_ENDPOINT');
  const queueUrl = urlVar(env, 'QUEUE_URL');
  const region = env.AWS_REGION?.trim() || env.AWS_DEFAULT_REGION?.trim() || 'us-east-1';
  const credentials = endpoint && !env.AWS_ACCESS_KEY_ID ? { accessKeyId: 'local', secretAccessKey: 'local' } : undefined;
  return { endpoint, queueUrl, region, credentials };
}

/**
 * The local event-source runner's settings, with Lambda's meaning and the SAM template's defaults.
 * @param {NodeJS.ProcessEnv} [env]
 */
export function loadRunnerConfig(env = process.env) {
  return {
    ...loadSqsConfig(env),
    batchSize: intVar(env, 'BATCH_SIZE', 1000, 1, 10_000),
    batchWindowMs: intVar(env, 'BATCH_WINDOW_MS', 1000, 0, 300_000),
    receivers: intVar(env, 'RECEIVERS', 4, 1, 64),
    concurrency: intVar(env, 'RUNNER_CONCURRENCY', 2, 1, 64),
    functionTimeoutMs: intVar(env, 'FUNCTION_TIMEOUT_MS', 60_000, 1000, 900_000),
  };
}
