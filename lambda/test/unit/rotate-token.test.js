import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { PutSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { rotate } from '../../src/rotate-token.js';
import { SECRET_ARN, startSecretsManagerStub } from '../support/secrets-manager-stub.js';

/** The rotation's four steps against the Secrets Manager stand-in, through the real SDK client. */
describe('the token rotation function (unit, Secrets Manager stand-in)', () => {
  /** @param {string} token */
  async function withSecret(token) {
    const secrets = await startSecretsManagerStub({ token });
    const client = new SecretsManagerClient({
      endpoint: secrets.env.AWS_ENDPOINT_URL_SECRETS_MANAGER,
      region: 'us-east-1',
      credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
    });
    /** @type {number[]} */ const waited = [];
    const deps = {
      client,
      waitMs: 1234,
      sleep: async (/** @type {number} */ ms) => void waited.push(ms),
    };
    return { secrets, deps, waited, close: () => (client.destroy(), secrets.close()) };
  }

  test('the four steps: every client a new token, pending (and waited for) before current; each step run twice is harmless', async (t) => {
    const old = { feeder: 'old-feeder-token', crm: 'old-crm-token' };
    const { secrets, deps, waited, close } = await withSecret(JSON.stringify(old));
    t.after(close);
    const version = secrets.startRotation();
    /** @param {'createSecret' | 'setSecret' | 'testSecret' | 'finishSecret'} step */
    const run = (step) =>
      rotate({ Step: step, SecretId: SECRET_ARN, ClientRequestToken: version }, deps);

    await run('createSecret');
    await run('createSecret');
    const pending = JSON.parse(/** @type {string} */ (secrets.valueAt('AWSPENDING')));
    assert.deepEqual(Object.keys(pending).sort(), ['crm', 'feeder']);
    assert.ok(
      Object.values(pending).every((token) => /^[\w-]{48}$/.test(token)),
      'new tokens: 48 URL-safe characters',
    );
    assert.notEqual(pending.feeder, old.feeder);
    assert.deepEqual(
      JSON.parse(/** @type {string} */ (secrets.valueAt('AWSCURRENT'))),
      old,
      'current untouched until finishSecret',
    );

    await run('setSecret');
    assert.deepEqual(
      waited,
      [1234],
      'setSecret waits for the services to read the pending version',
    );
    await run('testSecret');
    await run('finishSecret');
    await run('finishSecret');
    assert.deepEqual(JSON.parse(/** @type {string} */ (secrets.valueAt('AWSCURRENT'))), pending);
    assert.deepEqual(JSON.parse(/** @type {string} */ (secrets.valueAt('AWSPREVIOUS'))), old);
    assert.equal(secrets.valueAt('AWSPENDING'), undefined, 'no pending version left behind');
  });

  test("a client's limits and its right to erase, declared beside its token, go with it to its new token", async (t) => {
    const old = {
      feeder: 'old-feeder-token',
      backfill: { token: 'old-backfill-token', rate: 5000, burst: 10000, weight: 2 },
      ops: { token: 'old-ops-token', erase: true },
      crm: { token: 'old-crm-token', erase: false },
    };
    const { secrets, deps, close } = await withSecret(JSON.stringify(old));
    t.after(close);
    const version = secrets.startRotation();
    for (const step of /** @type {const} */ ([
      'createSecret',
      'setSecret',
      'testSecret',
      'finishSecret',
    ]))
      await rotate({ Step: step, SecretId: SECRET_ARN, ClientRequestToken: version }, deps);
    const current = JSON.parse(/** @type {string} */ (secrets.valueAt('AWSCURRENT')));
    assert.match(current.feeder, /^[\w-]{48}$/);
    const { token, ...limits } = current.backfill;
    assert.match(token, /^[\w-]{48}$/);
    assert.deepEqual(limits, { rate: 5000, burst: 10000, weight: 2 });
    assert.deepEqual(Object.keys(current.ops), ['token', 'erase']);
    assert.equal(current.ops.erase, true);
    assert.match(current.crm, /^[\w-]{48}$/, 'no right: a plain token, as it meant');
  });

  test('a current version that is not a JSON object of tokens fails createSecret, naming no token', async (t) => {
    const { secrets, deps, close } = await withSecret('a-plain-token-from-before');
    t.after(close);
    const version = secrets.startRotation();
    await assert.rejects(
      rotate({ Step: 'createSecret', SecretId: SECRET_ARN, ClientRequestToken: version }, deps),
      (err) =>
        err instanceof Error &&
        /AWSCURRENT is not a JSON object/.test(err.message) &&
        !err.message.includes('plain-token'),
    );
  });

  test('testSecret refuses a pending version that drops a client or keeps a token', async (t) => {
    const { secrets, deps, close } = await withSecret(
      JSON.stringify({ feeder: 'f-old', crm: 'c-old' }),
    );
    t.after(close);
    for (const [pending, problem] of /** @type {[object, RegExp][]} */ ([
      [{ feeder: 'f-new' }, /same clients/],
      [{ feeder: 'f-new', crm: 'c-old' }, /keeps a token/],
    ])) {
      const version = secrets.startRotation();
      await deps.client.send(
        new PutSecretValueCommand({
          SecretId: SECRET_ARN,
          ClientRequestToken: version,
          SecretString: JSON.stringify(pending),
          VersionStages: ['AWSPENDING'],
        }),
      );
      await assert.rejects(
        rotate({ Step: 'testSecret', SecretId: SECRET_ARN, ClientRequestToken: version }, deps),
        problem,
      );
    }
  });
});
