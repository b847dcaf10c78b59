import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { parseNamedTokens } from '@sluice/env/named-tokens';
import { ConfigError } from './errors.js';

/**
 * @typedef {{ send: (command: GetSecretValueCommand) => Promise<{ SecretString?: string }> }} SecretsClient
 */

/**
 * The feeder's configuration with its bearer token in place. On AWS the token lives in Secrets
 * Manager (INGEST_TOKEN_SECRET_ARN, its AWSCURRENT version) and is read here: the handler keeps the
 * result for the life of the execution environment, so a cold start costs one GetSecretValue and a
 * warm invocation none, and reads it again only when the service answers 401 (handler.js: once
 * per invocation), which is how a rotated token reaches a warm environment without a redeploy.
 * Locally INGEST_TOKEN is given as it is and nothing is fetched.
 *
 * The secret holds the token as plain text, or a JSON object of client name → token (the
 * service's INGEST_TOKENS form, which template.yaml's secret and its rotation use), from which the
 * feeder takes its own: INGEST_CLIENT_NAME's.
 *
 * @param {import('./config.js').FeederConfig} config
 * @param {{ client?: SecretsClient }} [options]  a client is injected by tests
 * @returns {Promise<import('./config.js').FeederConfig>}
 */
export async function withIngestToken(config, { client } = {}) {
  const secretId = config.ingestTokenSecretArn;
  if (!secretId) return config;
  // A client per read: a cold start and a 401 are the only reads, and a client made now reads
  // the environment as it is now.
  const secrets = client ?? new SecretsManagerClient({});
  const { SecretString } = await secrets.send(new GetSecretValueCommand({ SecretId: secretId }));
  return { ...config, ingestToken: tokenOf(SecretString, config.ingestClientName) };
}

/**
 * The token a secret's text holds for `clientName`. The secret's name is no secret; its value
 * never reaches a message or a log line.
 * @param {string | undefined} text @param {string} clientName
 */
function tokenOf(text, clientName) {
  const trimmed = text?.trim();
  if (!trimmed) throw new ConfigError('INGEST_TOKEN_SECRET_ARN', 'names a secret with no SecretString: put the token there, as plain text or a JSON object of client name → token');
  if (!trimmed.startsWith('{')) return trimmed;
  /** @type {import('@sluice/env/named-tokens').NamedToken[]} */
  let tokens;
  try {
    tokens = parseNamedTokens(trimmed);
  } catch (err) {
    throw new ConfigError('INGEST_TOKEN_SECRET_ARN', `names a secret that starts like a JSON object and is not one of client name → token that the service accepts: it ${/** @type {Error} */ (err).message}`);
  }
  const token = tokens.find(({ name }) => name === clientName)?.token;
  if (token === undefined) throw new ConfigError('INGEST_TOKEN_SECRET_ARN', `names a secret with no token for the client ${JSON.stringify(clientName)} (INGEST_CLIENT_NAME)`);
  return token;
}
