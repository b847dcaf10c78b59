// Secrets Manager's rotation of the ingest tokens: a Lambda of its own, bundled from this file.
import { randomBytes } from 'node:crypto';
import {
  DescribeSecretCommand,
  GetSecretValueCommand,
  PutSecretValueCommand,
  ResourceNotFoundException,
  SecretsManagerClient,
  UpdateSecretVersionStageCommand,
} from '@aws-sdk/client-secrets-manager';
import { defineVariables, loadEnv, milliseconds } from '@sluice/env';
import { parseNamedTokens } from '@sluice/env/named-tokens';

export const ROTATION_VARIABLES = defineVariables({
  ROTATION_WAIT_MS: {
    parser: milliseconds({ min: 0, max: 840_000 }),
    default: 125_000,
    description:
      'how long setSecret waits for every service to read the pending version: two of ' +
      "the services' INGEST_TOKENS_REFRESH_MS and a margin, within the function's timeout",
  },
});

/**
 * @typedef {{ Step: 'createSecret' | 'setSecret' | 'testSecret' | 'finishSecret', SecretId: string,
 *   ClientRequestToken: string }} RotationEvent
 */
/**
 * @typedef {{ client: { send: (command: any) => Promise<any> }, waitMs: number,
 *   sleep: (ms: number) => Promise<void> }} RotationDeps
 */

const newToken = () => randomBytes(36).toString('base64url');

/** The message names no token. @param {string | undefined} text @param {string} what */
function clientsOf(text, what) {
  try {
    return parseNamedTokens(text ?? '');
  } catch (err) {
    throw new Error(
      `${what} is not a JSON object of client name → token that the ` +
        `services accept: it ${err instanceof Error ? err.message : err}`,
    );
  }
}

/** @param {string | undefined} text @param {string} what @returns {Record<string, string>} */
const tokensOf = (text, what) =>
  Object.fromEntries(clientsOf(text, what).map(({ name, token }) => [name, token]));

/**
 * setSecret waits until every service (reading AWSPENDING too) accepts the new tokens before
 * finishSecret gives them out. A step may run twice (a retry): each checks whether it is done.
 * @param {RotationEvent} event @param {RotationDeps} deps
 */
export async function rotate(
  { Step: step, SecretId: secretId, ClientRequestToken: version },
  { client, waitMs, sleep },
) {
  const described = await client.send(new DescribeSecretCommand({ SecretId: secretId }));
  if (described.RotationEnabled === false)
    throw new Error(`rotation is not enabled on ${secretId}`);
  /** @type {Record<string, string[]>} */
  const stages = described.VersionIdsToStages ?? {};
  if (!stages[version]) throw new Error(`version ${version} is not a version of ${secretId}`);
  if (stages[version].includes('AWSCURRENT')) return;
  if (!stages[version].includes('AWSPENDING'))
    throw new Error(`version ${version} of ${secretId} is not AWSPENDING`);

  const secret = { client, secretId, version };
  switch (step) {
    case 'createSecret':
      return createPending(secret);
    case 'setSecret':
      return sleep(waitMs);
    case 'testSecret':
      return testPending(secret);
    case 'finishSecret':
      return finish(secret, stages);
    default:
      throw new Error(`unknown rotation step ${JSON.stringify(step)}`);
  }
}

/** @typedef {{ client: RotationDeps['client'], secretId: string, version: string }} Rotated */

/** @param {Rotated} secret @param {'AWSCURRENT' | 'AWSPENDING'} stage */
async function secretText({ client, secretId, version }, stage) {
  const which = stage === 'AWSPENDING' ? { VersionId: version } : {};
  const read = new GetSecretValueCommand({ SecretId: secretId, ...which, VersionStage: stage });
  return (await client.send(read)).SecretString;
}

/** createSecret. @param {Rotated} secret */
async function createPending(secret) {
  const current = clientsOf(await secretText(secret, 'AWSCURRENT'), 'AWSCURRENT');
  try {
    await secretText(secret, 'AWSPENDING');
    return;
  } catch (err) {
    if (!(err instanceof ResourceNotFoundException)) throw err;
  }
  // A client's limits and its right to erase, declared beside its token, go with it to its new
  // token.
  const next = Object.fromEntries(
    current.map(({ name, limits, erase }) => [
      name,
      limits || erase ? { token: newToken(), ...(erase ? { erase } : {}), ...limits } : newToken(),
    ]),
  );
  await secret.client.send(
    new PutSecretValueCommand({
      SecretId: secret.secretId,
      ClientRequestToken: secret.version,
      SecretString: JSON.stringify(next),
      VersionStages: ['AWSPENDING'],
    }),
  );
}

/** testSecret. @param {Rotated} secret */
async function testPending(secret) {
  const current = tokensOf(await secretText(secret, 'AWSCURRENT'), 'AWSCURRENT');
  const pending = tokensOf(await secretText(secret, 'AWSPENDING'), 'AWSPENDING');
  const names = (/** @type {object} */ o) => Object.keys(o).sort().join(',');
  if (names(current) !== names(pending))
    throw new Error('AWSPENDING does not name the same clients as AWSCURRENT');
  if (Object.keys(pending).some((name) => pending[name] === current[name]))
    throw new Error('AWSPENDING keeps a token of AWSCURRENT');
  if (new Set(Object.values(pending)).size !== Object.keys(pending).length)
    throw new Error('AWSPENDING gives two clients the same token');
}

/** finishSecret. @param {Rotated} secret @param {Record<string, string[]>} stages */
async function finish({ client, secretId, version }, stages) {
  const current = Object.entries(stages).find(([, s]) => s.includes('AWSCURRENT'))?.[0];
  await client.send(
    new UpdateSecretVersionStageCommand({
      SecretId: secretId,
      VersionStage: 'AWSCURRENT',
      MoveToVersionId: version,
      RemoveFromVersionId: current,
    }),
  );
  // Off AWSPENDING, which the services read too, so no stale pending version shadows a later put.
  await client.send(
    new UpdateSecretVersionStageCommand({
      SecretId: secretId,
      VersionStage: 'AWSPENDING',
      RemoveFromVersionId: version,
    }),
  );
}

export async function handler(/** @type {RotationEvent} */ event) {
  await rotate(event, {
    client: new SecretsManagerClient({}),
    waitMs: loadEnv(ROTATION_VARIABLES, process.env).ROTATION_WAIT_MS,
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  });
}
