import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { ConfigError } from '@sluice/env';
import { runNode } from '../../../test/support/child-process.js';
import { loadRunnerConfig, loadSqsConfig } from '../../local/sqs-config.js';

const REFUSE_TO_START = fileURLToPath(
  new URL('../../../test/support/refuse-to-start.js', import.meta.url),
);
const bin = (/** @type {string} */ name) =>
  fileURLToPath(new URL(`../../local/bin/${name}`, import.meta.url));
const HINT =
  'QUEUE_URL is required: the queue to use. `npm run elasticmq` makes one and prints its URL: SQS_ENDPOINT=http://127.0.0.1:9324 QUEUE_URL=http://127.0.0.1:9324/000000000000/sluice-users';

describe('no QUEUE_URL: where a queue comes from is said (unit)', () => {
  test('the loaders name the variable and the queue npm run elasticmq makes, beside the other problems', () => {
    for (const load of [loadSqsConfig, loadRunnerConfig]) {
      assert.throws(
        () => load({ BATCH_SIZE: '0' }),
        (err) => {
          assert.ok(err instanceof ConfigError);
          assert.ok(err.message.includes(HINT), err.message);
          return true;
        },
      );
    }
    assert.throws(
      () => loadSqsConfig({ QUEUE_URL: 'ftp://x' }),
      (err) => !(/** @type {Error} */ (err).message.includes('npm run elasticmq')),
    );
  });

  test('npm run produce and npm run feeder: one line with the hint, before they touch anything', async () => {
    const env = {
      ...process.env,
      QUEUE_URL: '',
      SQS_ENDPOINT: '',
      SERVICE_URL: 'http://127.0.0.1:3000',
    };
    for (const [name, args] of /** @type {const} */ ([
      ['produce.js', ['--count', '10']],
      ['feeder.js', []],
    ])) {
      const run = runNode(['--import', REFUSE_TO_START, bin(name), ...args], { env });
      assert.equal(await run.exited, 1, run.err());
      assert.equal(run.err(), `${name.replace('.js', '')}: bad configuration: ${HINT}\n`);
    }
  });
});
