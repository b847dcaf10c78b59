import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { loadFeederConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { withIngestToken } from '../../src/ingest-token.js';

const ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice-ingest-token-AbCdEf';

/** A Secrets Manager stand-in that records what it was asked (no AWS is reachable from the tests). */
function fakeSecrets(/** @type {string | undefined} */ secretString) {
  /** @type {GetSecretValueCommand[]} */
  const asked = [];
  return {
    asked,
    client: {
      send: async (/** @type {GetSecretValueCommand} */ command) => (
        asked.push(command),
        { SecretString: secretString }
      ),
    },
  };
}

describe('the ingest token (unit)', () => {
  test('INGEST_TOKEN_SECRET_ARN: the token is read from that secret, once, and takes the place of INGEST_TOKEN', async () => {
    const secrets = fakeSecrets('  t0ken-from-secrets-manager\n');
    const config = loadFeederConfig({
      SERVICE_URL: 'http://alb.internal',
      INGEST_TOKEN_SECRET_ARN: ARN,
    });
    assert.equal(config.ingestToken, undefined);
    const resolved = await withIngestToken(config, { client: secrets.client });
    assert.equal(resolved.ingestToken, 't0ken-from-secrets-manager');
    assert.equal(secrets.asked.length, 1);
    assert.ok(secrets.asked[0] instanceof GetSecretValueCommand);
    assert.equal(secrets.asked[0].input.SecretId, ARN);
  });

  test("a secret holding a JSON object of client name → token: the feeder takes INGEST_CLIENT_NAME's (feeder by default)", async () => {
    const object = JSON.stringify({ feeder: 'feeder-token-1', crm: 'crm-token-2' });
    const config = loadFeederConfig({
      SERVICE_URL: 'http://alb.internal',
      INGEST_TOKEN_SECRET_ARN: ARN,
    });
    assert.equal(
      (await withIngestToken(config, { client: fakeSecrets(object).client })).ingestToken,
      'feeder-token-1',
    );
    const crm = loadFeederConfig({
      SERVICE_URL: 'http://alb.internal',
      INGEST_TOKEN_SECRET_ARN: ARN,
      INGEST_CLIENT_NAME: 'crm',
    });
    assert.equal(
      (await withIngestToken(crm, { client: fakeSecrets(object).client })).ingestToken,
      'crm-token-2',
    );
    const other = loadFeederConfig({
      SERVICE_URL: 'http://alb.internal',
      INGEST_TOKEN_SECRET_ARN: ARN,
      INGEST_CLIENT_NAME: 'billing',
    });
    await assert.rejects(
      withIngestToken(other, { client: fakeSecrets(object).client }),
      (err) =>
        err instanceof ConfigError &&
        /no token for the client "billing"/.test(err.message) &&
        !err.message.includes('-token-'),
    );
    await assert.rejects(
      withIngestToken(config, { client: fakeSecrets('{"feeder": "x').client }),
      (err) => err instanceof ConfigError && err.message.startsWith('INGEST_TOKEN_SECRET_ARN'),
    );
  });

  test('a plain INGEST_TOKEN (the local runner) is used as it is and nothing is fetched', async () => {
    const secrets = fakeSecrets('never');
    const config = loadFeederConfig({
      SERVICE_URL: 'http://127.0.0.1:3000',
      INGEST_TOKEN: 'local-token',
    });
    const resolved = await withIngestToken(config, { client: secrets.client });
    assert.equal(resolved.ingestToken, 'local-token');
    assert.equal(secrets.asked.length, 0);
  });

  test('an empty secret stops the cold start with the variable named, never the value', async () => {
    const config = loadFeederConfig({
      SERVICE_URL: 'http://alb.internal',
      INGEST_TOKEN_SECRET_ARN: ARN,
    });
    await assert.rejects(
      withIngestToken(config, { client: fakeSecrets('   ').client }),
      (err) => err instanceof ConfigError && err.message.startsWith('INGEST_TOKEN_SECRET_ARN'),
    );
  });

  test('a failed fetch rejects, so the handler keeps no half-made configuration and tries again next invocation', async () => {
    const config = loadFeederConfig({
      SERVICE_URL: 'http://alb.internal',
      INGEST_TOKEN_SECRET_ARN: ARN,
    });
    const client = {
      send: async () => {
        throw Object.assign(new Error('AccessDeniedException'), { name: 'AccessDeniedException' });
      },
    };
    await assert.rejects(withIngestToken(config, { client }), /AccessDeniedException/);
  });

  for (const [env, why] of /** @type {[NodeJS.ProcessEnv, string][]} */ ([
    [{ INGEST_TOKEN_SECRET_ARN: ARN, INGEST_TOKEN: 'both' }, 'both ways at once'],
    [{ INGEST_TOKEN_SECRET_ARN: 'sluice-ingest-token' }, 'a name, not an ARN'],
  ])) {
    test(`INGEST_TOKEN_SECRET_ARN is refused with its name: ${why}`, () => {
      assert.throws(
        () => loadFeederConfig({ SERVICE_URL: 'http://alb.internal', ...env }),
        (err) => err instanceof ConfigError && err.message.startsWith('INGEST_TOKEN_SECRET_ARN'),
      );
    });
  }
});
