import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pino from 'pino';
import { TokenSource } from '../../src/auth/token-source.js';
import { ConfigError } from '../../src/errors.js';

const SECRET_ARN =
  'arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice-ingest-tokens-AbCdEf';
const config = {
  ingestToken: undefined,
  ingestTokens: undefined,
  ingestTokensFile: undefined,
  ingestTokensSecretArn: SECRET_ARN,
  ingestTokensRefreshMs: 60_000,
};

function keptLogger() {
  /** @type {any[]} */
  const lines = [];
  return {
    logger: pino(
      { level: 'debug' },
      { write: (/** @type {string} */ line) => void lines.push(JSON.parse(line)) },
    ),
    lines,
  };
}

/**
 * A secret whose every GetSecretValue waits until the test lets it answer, with the stages as they
 * are at that moment. @param {Record<string, string | undefined>} stages
 */
function heldSecret(stages) {
  /** @type {{ stage: string, answer: () => void }[]} */
  const held = [];
  const reader = {
    getSecretString: (/** @type {string} */ _id, /** @type {string} */ stage) =>
      new Promise((resolve) => held.push({ stage, answer: () => resolve(stages[stage]) })),
  };
  /** Answers what is held, and whatever those answers ask next, until nothing more is asked. */
  const answerAll = async () => {
    while (held.length > 0) {
      /** @type {{ answer: () => void }} */ (held.shift()).answer();
      await new Promise((r) => setImmediate(r));
    }
  };
  return { reader, held, stages, answerAll };
}

describe('a Secrets Manager secret: no current version, refreshes that overlap (unit)', () => {
  test('a secret with no AWSCURRENT version stops start-up, naming the variable and the problem', async () => {
    const { logger } = keptLogger();
    const reader = {
      getSecretString: async (/** @type {string} */ _id, /** @type {string} */ stage) =>
        stage === 'AWSPENDING' ? '{"feeder":"pending-token-1"}' : undefined,
    };
    await assert.rejects(
      new TokenSource(config, { logger, secrets: reader }).start(),
      (err) =>
        err instanceof ConfigError &&
        err.message === 'INGEST_TOKENS_SECRET_ARN names a secret with no current version',
    );
  });

  test('a current version that disappears later: logged, the tokens in force stay, pending ones alone are not taken', async (t) => {
    const { logger, lines } = keptLogger();
    /** @type {Record<string, string | undefined>} */
    const stages = { AWSCURRENT: '{"feeder":"current-token-1"}' };
    const reader = {
      getSecretString: async (/** @type {string} */ _id, /** @type {string} */ stage) =>
        stages[stage],
    };
    const source = await new TokenSource(config, { logger, secrets: reader }).start();
    t.after(() => source.close());
    stages.AWSCURRENT = undefined;
    stages.AWSPENDING = '{"feeder":"pending-token-2"}';
    await source.refresh();
    assert.equal(source.current.match('current-token-1'), 'feeder');
    assert.equal(source.current.match('pending-token-2'), undefined);
    assert.ok(
      lines.some(
        (l) =>
          l.level === 40 &&
          l.variable === 'INGEST_TOKENS_SECRET_ARN' &&
          l.problem === 'names a secret with no current version',
      ),
    );
    assert.equal(JSON.stringify(lines).includes('-token-'), false);
  });

  test('pending and current on one version (a rotation ending): its tokens taken once, no problem logged; an unchanged read logs nothing', async (t) => {
    const { logger, lines } = keptLogger();
    /** @type {Record<string, string | undefined>} */
    const stages = {
      AWSCURRENT: '{"feeder":"token-3","crm":"token-4"}',
      AWSPENDING: '{"feeder":"token-3","crm":"token-4"}',
    };
    const reader = {
      getSecretString: async (/** @type {string} */ _id, /** @type {string} */ stage) =>
        stages[stage],
    };
    const source = await new TokenSource(config, { logger, secrets: reader }).start();
    t.after(() => source.close());
    assert.equal(source.current.match('token-3'), 'feeder');
    assert.equal(source.current.size, 2);
    await source.refresh();
    await source.refresh();
    assert.deepEqual(
      lines.map((l) => [l.level, l.msg]),
      [[30, 'bearer tokens read']],
      'read once, logged once',
    );
  });

  test('two refreshes at once share one read; the next refresh reads again', async (t) => {
    const { logger } = keptLogger();
    const secret = heldSecret({ AWSCURRENT: '{"feeder":"old-token-1"}' });
    const starting = new TokenSource(config, { logger, secrets: secret.reader }).start();
    await secret.answerAll();
    const source = await starting;
    t.after(() => source.close());

    secret.stages.AWSPENDING = '{"feeder":"new-token-2"}';
    const first = source.refresh();
    const second = source.refresh();
    assert.equal(second, first, 'the second joins the read under way');
    assert.equal(secret.held.length, 1, 'one GetSecretValue in flight, not two');
    await secret.answerAll();
    await Promise.all([first, second]);
    assert.equal(source.current.match('new-token-2'), 'feeder');

    // The rotation finishes: a later refresh reads again and drops the old token.
    secret.stages.AWSCURRENT = secret.stages.AWSPENDING;
    secret.stages.AWSPENDING = undefined;
    const third = source.refresh();
    assert.notEqual(third, first);
    await secret.answerAll();
    await third;
    assert.equal(source.current.match('old-token-1'), undefined);
    assert.equal(source.current.match('new-token-2'), 'feeder');
  });
});
