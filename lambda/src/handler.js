import { loadTracingConfig } from '@sluice/env';
import { loadFeederConfig } from './config.js';
import { createFeeder } from './feeder.js';
import { withIngestToken } from './ingest-token.js';
import { createPowertools } from './observability.js';
import { loadFeederTracing } from './tracing.js';

/** @param {NodeJS.ProcessEnv} env @returns {Promise<import('./feeder.js').SqsHandler>} */
async function composeFeeder(env) {
  const config = loadFeederConfig(env);
  const tracing = await loadFeederTracing(loadTracingConfig(env));
  return createFeeder({ config, readToken: withIngestToken, tracing, ...createPowertools() });
}

/**
 * Composed at the first invocation, not at import, so a bad variable fails one that says so.
 * @param {NodeJS.ProcessEnv} [env] @returns {import('./feeder.js').SqsHandler}
 */
export function feederFromEnvironment(env = process.env) {
  /** @type {Promise<import('./feeder.js').SqsHandler> | undefined} */
  let feeder = undefined;
  return async (event, context) => {
    feeder ??= composeFeeder(env).catch((err) => {
      feeder = undefined;
      throw err;
    });
    return (await feeder)(event, context);
  };
}

export const handler = feederFromEnvironment();
