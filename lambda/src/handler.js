// The Lambda entry (template.yaml's Handler, handler.handler): the feeder composed from the
// environment, once per execution environment, on its first invocation. Everything else is
// feeder.js's, built from the parts handed to it here.
import { loadTracingConfig } from '@sluice/env';
import { loadFeederConfig } from './config.js';
import { createFeeder } from './feeder.js';
import { withIngestToken } from './ingest-token.js';
import { createPowertools } from './observability.js';
import { loadFeederTracing } from './tracing.js';

/**
 * The feeder as `env` configures it: its variables and the OTEL_ ones read and checked once (a
 * bad one fails the invocation with a ConfigError naming it), Powertools' Logger and Metrics, the
 * token from Secrets Manager when INGEST_TOKEN_SECRET_ARN names one.
 * @param {NodeJS.ProcessEnv} env
 * @returns {Promise<import('./feeder.js').SqsHandler>}
 */
async function composeFeeder(env) {
  const config = loadFeederConfig(env);
  const tracing = await loadFeederTracing(loadTracingConfig(env));
  return createFeeder({ config, readToken: withIngestToken, tracing, ...createPowertools() });
}

/**
 * A handler that composes its feeder from `env` at its first invocation (not at import: a cold
 * start costs the same as before, and a bad variable fails an invocation, which says so, rather
 * than the import). A composition that failed is tried again at the next invocation.
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {import('./feeder.js').SqsHandler}
 */
export function feederFromEnvironment(env = process.env) {
  /** @type {Promise<import('./feeder.js').SqsHandler> | undefined} */
  let feeder;
  return async (event, context) => {
    feeder ??= composeFeeder(env).catch((err) => {
      feeder = undefined;
      throw err;
    });
    return (await feeder)(event, context);
  };
}

/** The Lambda handler for an SQS event source with ReportBatchItemFailures. */
export const handler = feederFromEnvironment();
