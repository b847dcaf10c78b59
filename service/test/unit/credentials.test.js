import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { syncBuiltinESMExports } from 'node:module';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, test } from 'node:test';
import pino from 'pino';
import { TokenSource } from '../../src/auth/token-source.js';
import { parseNamedTokens } from '@sluice/env/named-tokens';
import { TokenSet } from '../../src/auth/token-set.js';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

const SECRET_ARN =
  'arn:aws:secretsmanager:eu-west-1:123456789012:secret:sluice-ingest-tokens-AbCdEf';

/** A logger whose lines are kept, to check that none holds a token. */
function keptLogger() {
  /** @type {any[]} */
  const lines = [];
  const logger = pino(
    { level: 'debug' },
    { write: (/** @type {string} */ line) => void lines.push(JSON.parse(line)) },
  );
  return { logger, lines };
}

describe('named tokens: parsing and constant-time matching (unit)', () => {
  test('a JSON object of name → token: each token names its client, any other token names none', () => {
    const set = new TokenSet(
      parseNamedTokens(JSON.stringify({ feeder: 'tok-feeder-1', 'crm.import': 'tok-crm-2' })),
    );
    assert.equal(set.match('tok-feeder-1'), 'feeder');
    assert.equal(set.match('tok-crm-2'), 'crm.import');
    assert.equal(set.match('tok-crm-'), undefined, 'a prefix');
    assert.equal(set.match('tok-crm-22'), undefined, 'a longer one');
    assert.equal(set.match(''), undefined);
    assert.deepEqual([...set.names], ['feeder', 'crm.import']);
    assert.equal(JSON.stringify(set).includes('tok-'), false, 'the set keeps digests, not tokens');
  });

  test('every client is compared, the match first or last alike (no early exit)', (t) => {
    const set = new TokenSet(
      Array.from({ length: 5 }, (_, i) => ({ name: `c${i}`, token: `token-${i}` })),
    );
    // timingSafeEqual counted where token-set.js imports it (node:crypto's named export, synced).
    const compare = t.mock.method(crypto, 'timingSafeEqual');
    syncBuiltinESMExports();
    t.after(() => {
      compare.mock.restore();
      syncBuiltinESMExports();
    });
    for (const [token, client] of [
      ['token-0', 'c0'],
      ['token-4', 'c4'],
      ['nobody', undefined],
    ]) {
      const before = compare.mock.callCount();
      assert.equal(set.match(token), client);
      assert.equal(compare.mock.callCount() - before, 5, `${token}: every client compared`);
    }
  });

  for (const [text, problem] of [
    ['{"feeder": ', /not valid JSON/],
    ['["tok"]', /JSON object/],
    ['"tok"', /JSON object/],
    ['{}', /holds no client/],
    ['{"": "tok"}', /client name \(its entry 1\) that is not one/],
    ['{"has space": "tok"}', /client name \(its entry 1\) that is not one/],
    // A name and its token swapped: the key, a token, is never quoted.
    [
      '{"feeder": "tok-a", "s3cr3t+token/==": "ops"}',
      /client name \(its entry 2\) that is not one/,
    ],
    ['{"feeder": ""}', /"feeder" no token/],
    ['{"feeder": 42}', /"feeder" no token/],
    ['{"a": "same-token", "b": "same-token"}', /"a" and "b" the same token/],
  ]) {
    test(`INGEST_TOKENS ${text}: start-up stops naming the variable, never a token`, () => {
      assert.throws(
        () => loadConfig({ INGEST_TOKENS: text }),
        (err) => {
          assert.ok(err instanceof ConfigError);
          assert.ok(err.message.startsWith('INGEST_TOKENS '), err.message);
          assert.match(err.message, problem);
          assert.equal(
            err.message.includes('same-token') ||
              err.message.includes('"tok"') ||
              err.message.includes('s3cr3t'),
            false,
            'a token in the message',
          );
          return true;
        },
      );
    });
  }

  test('configuration across variables: one source of named tokens, INGEST_TOKEN beside them as the client default', () => {
    const c = loadConfig({ INGEST_TOKEN: 'old', INGEST_TOKENS: '{"feeder":"new"}' });
    assert.deepEqual(c.auth.ingestTokens, [{ name: 'feeder', token: 'new' }]);
    assert.equal(c.host, '0.0.0.0', 'credentials required: listening beyond loopback');
    for (const [env, variable] of /** @type {[Record<string, string>, string][]} */ ([
      [{ INGEST_TOKENS: '{"a":"x"}', INGEST_TOKENS_FILE: '/etc/t.json' }, 'INGEST_TOKENS_FILE'],
      [
        { INGEST_TOKENS_FILE: '/etc/t.json', INGEST_TOKENS_SECRET_ARN: SECRET_ARN },
        'INGEST_TOKENS_SECRET_ARN',
      ],
      [{ INGEST_TOKEN: 'x', INGEST_TOKENS: '{"a":"x"}' }, 'INGEST_TOKENS'],
      [{ INGEST_TOKEN: 'x', INGEST_TOKENS: '{"default":"y"}' }, 'INGEST_TOKENS'],
      [{ INGEST_TOKENS_SECRET_ARN: 'sluice-tokens' }, 'INGEST_TOKENS_SECRET_ARN'],
      [{ INGEST_TOKENS_REFRESH_MS: '10' }, 'INGEST_TOKENS_REFRESH_MS'],
    ])) {
      assert.throws(
        () => loadConfig(env),
        (err) =>
          err instanceof ConfigError &&
          err.problems.some((p) => p.variable === variable) &&
          !err.message.includes('"x"'),
        JSON.stringify(env),
      );
    }
    assert.equal(
      loadConfig({ INGEST_TOKENS_FILE: '/etc/t.json' }).auth.ingestTokensRefreshMs,
      1000,
    );
    assert.equal(
      loadConfig({ INGEST_TOKENS_SECRET_ARN: SECRET_ARN }).auth.ingestTokensRefreshMs,
      60_000,
    );
  });
});

describe('the right to erase, declared with a token (unit)', () => {
  test('"erase": true beside a token lets its client erase; none, false or a plain token does not', () => {
    const c = loadConfig({
      INGEST_TOKENS: JSON.stringify({
        ops: { token: 'tok-ops', erase: true },
        feeder: { token: 'tok-feeder', erase: true, rate: 100 },
        crm: { token: 'tok-crm', erase: false },
        web: 'tok-web',
      }),
    });
    const set = new TokenSet(/** @type {any} */ (c.auth.ingestTokens));
    assert.deepEqual(
      ['ops', 'feeder', 'crm', 'web', 'nobody'].map((name) => set.mayErase(name)),
      [true, true, false, false, false],
    );
    assert.deepEqual(set.limitsOf('feeder'), { rate: 100 }, 'its limits as before');
  });

  for (const value of ['"yes"', '1', 'null', '"tok-secret"', '[true]', '{}']) {
    test(`INGEST_TOKENS with "erase": ${value}: start-up stops naming the variable and the client`, () => {
      assert.throws(
        () => loadConfig({ INGEST_TOKENS: `{"ops": {"token": "tok-x", "erase": ${value}}}` }),
        (err) => {
          assert.ok(err instanceof ConfigError);
          assert.equal(
            err.message,
            'INGEST_TOKENS gives the client "ops" an erase that is not true or false',
          );
          return true;
        },
      );
    });
  }

  test('INGEST_TOKEN, the one operator credential, may erase; the named clients beside it only as declared', async () => {
    const { logger } = keptLogger();
    const source = await new TokenSource(
      {
        ingestToken: 'operator-token',
        ingestTokens: parseNamedTokens('{"feeder": "tok-feeder"}'),
        ingestTokensFile: undefined,
        ingestTokensSecretArn: undefined,
        ingestTokensRefreshMs: 60_000,
      },
      { logger },
    ).start();
    assert.equal(source.current.match('operator-token'), 'default');
    assert.equal(source.current.mayErase('default'), true);
    assert.equal(source.current.mayErase('feeder'), false);
  });

  test('a client named twice (a rotation): its first entry says whether it may erase', () => {
    const named = (/** @type {boolean[]} */ ...rights) =>
      new TokenSet(
        rights.map((erase, i) => ({ name: 'ops', token: `tok-${i}`, ...(erase ? { erase } : {}) })),
      ).mayErase('ops');
    assert.equal(named(true, false), true);
    assert.equal(named(false, true), false, 'a later entry grants nothing');
  });
});

describe('a token file, read again as it changes (unit)', () => {
  test('a client added, the old one removed: each change in force after a refresh; a bad rewrite keeps the tokens in force', async (t) => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-tokens-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const file = path.join(dir, 'tokens.json');
    await writeFile(file, JSON.stringify({ 'feeder-a': 'token-a-0123456789' }));
    const { logger, lines } = keptLogger();
    const source = await new TokenSource(
      {
        ingestToken: 'legacy-token',
        ingestTokens: undefined,
        ingestTokensFile: file,
        ingestTokensSecretArn: undefined,
        ingestTokensRefreshMs: 60_000,
      },
      { logger },
    ).start();
    t.after(() => source.close());
    assert.equal(source.current.match('token-a-0123456789'), 'feeder-a');
    assert.equal(
      source.current.match('legacy-token'),
      'default',
      'INGEST_TOKEN stays beside the file',
    );

    // Written as editors and Kubernetes do: a new file renamed over the old one.
    await writeFile(
      `${file}.new`,
      JSON.stringify({ 'feeder-a': 'token-a-0123456789', 'feeder-b': 'token-b-9876543210' }),
    );
    await rename(`${file}.new`, file);
    await source.refresh();
    assert.equal(source.current.match('token-a-0123456789'), 'feeder-a');
    assert.equal(source.current.match('token-b-9876543210'), 'feeder-b');

    await writeFile(file, '{"feeder-b": "token-b-98765');
    await source.refresh();
    assert.equal(
      source.current.match('token-a-0123456789'),
      'feeder-a',
      'a half-written file changes nothing',
    );
    assert.ok(
      lines.some(
        (l) =>
          l.level === 40 && l.variable === 'INGEST_TOKENS_FILE' && /not valid JSON/.test(l.problem),
      ),
    );

    await writeFile(file, JSON.stringify({ 'feeder-b': 'token-b-9876543210' }));
    await source.refresh();
    assert.equal(source.current.match('token-a-0123456789'), undefined, 'revoked');
    assert.equal(source.current.match('token-b-9876543210'), 'feeder-b');

    await rm(file);
    await source.refresh();
    assert.equal(
      source.current.match('token-b-9876543210'),
      'feeder-b',
      'a file gone for a moment changes nothing',
    );
    assert.ok(lines.some((l) => l.problem === 'cannot be read (ENOENT)'));

    const logged = JSON.stringify(lines);
    for (const secret of [
      'token-a-0123456789',
      'token-b-9876543210',
      'token-b-98765',
      'legacy-token',
    ])
      assert.equal(logged.includes(secret), false, `${secret} logged`);
    assert.ok(
      lines.some((l) => l.msg === 'bearer tokens read' && l.clients.includes('feeder-b')),
      'the names read are logged',
    );
  });

  test('a file that cannot be read or parsed at start stops start-up naming INGEST_TOKENS_FILE', async (t) => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-tokens-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const { logger } = keptLogger();
    const config = {
      ingestToken: undefined,
      ingestTokens: undefined,
      ingestTokensSecretArn: undefined,
      ingestTokensRefreshMs: 1000,
    };
    await assert.rejects(
      new TokenSource(
        { ...config, ingestTokensFile: path.join(dir, 'none.json') },
        { logger },
      ).start(),
      (err) =>
        err instanceof ConfigError && err.message === 'INGEST_TOKENS_FILE cannot be read (ENOENT)',
    );
    await writeFile(path.join(dir, 'dup.json'), '{"a": "secret-x", "b": "secret-x"}');
    await assert.rejects(
      new TokenSource(
        { ...config, ingestTokensFile: path.join(dir, 'dup.json') },
        { logger },
      ).start(),
      (err) =>
        err instanceof ConfigError &&
        /^INGEST_TOKENS_FILE gives the clients "a" and "b" the same token/.test(err.message) &&
        !err.message.includes('secret-x'),
    );
  });
});

describe('a Secrets Manager secret: AWSCURRENT and AWSPENDING both accepted (unit)', () => {
  /** A secret by stage, as GetSecretValue answers it. @param {Record<string, string | undefined>} stages */
  function secretReader(stages) {
    /** @type {string[]} */
    const asked = [];
    return {
      asked,
      stages,
      reader: {
        getSecretString: async (/** @type {string} */ id, /** @type {string} */ stage) => (
          asked.push(`${id === SECRET_ARN ? 'arn' : id} ${stage}`),
          stages[stage]
        ),
      },
    };
  }
  const config = {
    ingestToken: undefined,
    ingestTokens: undefined,
    ingestTokensFile: undefined,
    ingestTokensSecretArn: SECRET_ARN,
    ingestTokensRefreshMs: 60_000,
  };

  test('a rotation: pending accepted beside current, then current alone once it finishes', async (t) => {
    const secrets = secretReader({ AWSCURRENT: '{"feeder":"old-token-123"}' });
    const { logger, lines } = keptLogger();
    const source = await new TokenSource(config, { logger, secrets: secrets.reader }).start();
    t.after(() => source.close());
    assert.equal(source.current.match('old-token-123'), 'feeder');
    assert.deepEqual(secrets.asked, ['arn AWSPENDING', 'arn AWSCURRENT'], 'pending read first');

    secrets.stages.AWSPENDING = '{"feeder":"new-token-456"}';
    await source.refresh();
    assert.equal(source.current.match('old-token-123'), 'feeder');
    assert.equal(source.current.match('new-token-456'), 'feeder');

    secrets.stages.AWSCURRENT = secrets.stages.AWSPENDING;
    secrets.stages.AWSPENDING = undefined;
    await source.refresh();
    assert.equal(source.current.match('old-token-123'), undefined);
    assert.equal(source.current.match('new-token-456'), 'feeder');

    secrets.stages.AWSCURRENT = 'not json';
    await source.refresh();
    assert.equal(source.current.match('new-token-456'), 'feeder', 'a bad version changes nothing');
    assert.ok(
      lines.some(
        (l) => l.variable === 'INGEST_TOKENS_SECRET_ARN' && /not valid JSON/.test(l.problem),
      ),
    );
    assert.equal(JSON.stringify(lines).includes('-token-'), false);
  });

  test('a secret that cannot be read at start stops start-up naming INGEST_TOKENS_SECRET_ARN', async () => {
    const { logger } = keptLogger();
    const reader = {
      getSecretString: async () => {
        throw Object.assign(new Error('User: x is not authorized'), {
          name: 'AccessDeniedException',
        });
      },
    };
    await assert.rejects(
      new TokenSource(config, { logger, secrets: reader }).start(),
      (err) =>
        err instanceof ConfigError &&
        err.message === 'INGEST_TOKENS_SECRET_ARN cannot be read (AccessDeniedException)',
    );
  });
});
