import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { ConfigError } from './errors.js';

/**
 * @typedef {{ send: (command: GetSecretValueCommand) => Promise<{ SecretString?: string }> }} SecretsClient
 */

/**
 * The feeder's configuration with its bearer token in place. On AWS the token lives in Secrets
 * Manager (INGEST_TOKEN_SECRET_ARN) and is read here once: the handler keeps the result for the
 * life of the execution environment, so a cold start costs one GetSecretValue and a warm
 * invocation none. Locally INGEST_TOKEN is given as it is and nothing is fetched.
 *
 * A secret rotated after a cold start is seen by environments started after it; the service
 * compares against the token it read at its own start, so both move on their next restart.
 *
 * @param {import('./config.js').FeederConfig} config
 * @param {{ client?: SecretsClient }} [options]  a client is injected by tests
 * @returns {Promise<import('./config.js').FeederConfig>}
 */
export async function withIngestToken(config, { client } = {}) {
  const secretId = config.ingestTokenSecretArn;
  if (!secretId) return config;
  const secrets = client ?? new SecretsManagerClient({});
  const { SecretString } = await secrets.send(new GetSecretValueCommand({ SecretId: secretId }));
  const token = SecretString?.trim();
  // The secret's name is no secret; its value never reaches a message or a log line.
  if (!token) throw new ConfigError('INGEST_TOKEN_SECRET_ARN', 'names a secret with no SecretString: put the token there as plain text');
  return { ...config, ingestToken: token };
}
