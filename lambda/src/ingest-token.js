import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { parseNamedTokens } from '@sluice/env/named-tokens';
import { ConfigError } from './errors.js';

/**
 * @typedef {{ send: (command: GetSecretValueCommand) =>
 *   Promise<{ SecretString?: string }> }} SecretsClient
 */

/**
 * Read at a cold start and on a 401, which is how a rotated token reaches a warm environment.
 * @param {import('./config.js').FeederConfig} config @param {{ client?: SecretsClient }} [options]
 * @returns {Promise<import('./config.js').FeederConfig>}
 */
export async function withIngestToken(config, { client } = {}) {
  const secretId = config.ingestTokenSecretArn;
  if (!secretId) return config;
  // A client per read (they are rare): it reads the environment as it is now.
  const secrets = client ?? new SecretsManagerClient({});
  const { SecretString } = await secrets.send(new GetSecretValueCommand({ SecretId: secretId }));
  return { ...config, ingestToken: tokenOf(SecretString, config.ingestClientName) };
}

/** Never in a message. @param {string | undefined} text @param {string} clientName */
function tokenOf(text, clientName) {
  const trimmed = text?.trim();
  if (!trimmed)
    throw new ConfigError(
      'INGEST_TOKEN_SECRET_ARN',
      'names a secret with no SecretString: put the token there, ' +
        'as plain text or a JSON object of client name → token',
    );
  if (!trimmed.startsWith('{')) return trimmed;
  /** @type {import('@sluice/env/named-tokens').NamedToken[]} */
  let tokens;
  try {
    tokens = parseNamedTokens(trimmed);
  } catch (err) {
    throw new ConfigError(
      'INGEST_TOKEN_SECRET_ARN',
      `names a secret that starts like a JSON object and is not one of client name ` +
        `→ token that the service accepts: it ${err instanceof Error ? err.message : err}`,
    );
  }
  const token = tokens.find(({ name }) => name === clientName)?.token;
  if (token === undefined)
    throw new ConfigError(
      'INGEST_TOKEN_SECRET_ARN',
      `names a secret with no token for the ` +
        `client ${JSON.stringify(clientName)} (INGEST_CLIENT_NAME)`,
    );
  return token;
}
