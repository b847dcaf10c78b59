// `npm start` checks every configuration source, the files its variables name too, before it
// starts anything, and says what is wrong in one `sluice:` line that holds no credential.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { runNode } from '../support/child-process.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const START = path.join(root, 'scripts', 'start.js');
const REFUSE_TO_START = path.join(root, 'test', 'support', 'refuse-to-start.js');

describe('npm start refuses a bad configuration before it starts anything (unit: nothing may start)', () => {
  /** @type {string} */
  let dir;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-start-config-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** `npm start`'s script with the embedded PostgreSQL's directory in the test's, and nothing allowed to start. @param {Record<string, string>} env */
  async function refused(env) {
    const base = { ...process.env };
    for (const name of [
      'DATABASE_URL',
      'PORT',
      'HOST',
      'INGEST_TOKEN',
      'INGEST_TOKENS',
      'EMBEDDED_PG_PORT',
      'EMBEDDED_PG_DIR',
    ])
      delete base[name];
    const run = runNode(['--import', REFUSE_TO_START, START], {
      cwd: root,
      env: { ...base, EMBEDDED_PG_DIR: path.join(dir, 'pg'), LOG_LEVEL: 'warn', ...env },
    });
    assert.equal(await run.exited, 1, run.err());
    assert.doesNotMatch(run.err(), /refuse-to-start/, 'it started something before checking');
    assert.doesNotMatch(run.out() + run.err(), /embedded PostgreSQL/);
    assert.deepEqual(await readdir(dir), [], 'no data directory made');
    const lines = run.err().trim().split('\n');
    assert.equal(lines.length, 1, run.err());
    assert.equal(run.out(), '');
    return lines[0];
  }

  test('a token file that is not there: one line naming INGEST_TOKENS_FILE', async () => {
    const missing = path.join(dir, 'no-such-tokens.json');
    assert.equal(
      await refused({ INGEST_TOKENS_FILE: missing }),
      `sluice: bad configuration: INGEST_TOKENS_FILE names a file that cannot be read: ${missing} (no such file)`,
    );
  });

  test('a token file the service would refuse, and a directory: named with their problem, never their content', async () => {
    const file = path.join(os.tmpdir(), `sluice-bad-tokens-${process.pid}.json`);
    await writeFile(file, '{"feeder": "s3cret-token", "other": "s3cret-token"}');
    try {
      const line = await refused({ INGEST_TOKENS_FILE: file });
      assert.match(
        line,
        /^sluice: bad configuration: INGEST_TOKENS_FILE gives the clients "feeder" and "other" the same token/,
      );
      assert.ok(!line.includes('s3cret-token'));
    } finally {
      await rm(file, { force: true });
    }
    assert.equal(
      await refused({ INGEST_TOKENS_FILE: os.tmpdir() }),
      `sluice: bad configuration: INGEST_TOKENS_FILE names ${os.tmpdir()}, which is not a regular file`,
    );
  });

  test('a DATABASE_URL of the wrong scheme: refused without its password, in the user part or the query', async () => {
    const line = await refused({
      DATABASE_URL:
        'postgresql+psycopg://sluice:S3cretPassw0rd@127.0.0.1:55432/sluice?sslpassword=Qu3ryPassw0rd',
    });
    assert.equal(
      line,
      'sluice: bad configuration: DATABASE_URL must be a URL (postgres:// or postgresql://), got "postgresql+psycopg://sluice:***@127.0.0.1:55432/sluice?sslpassword=***"',
    );
  });
});
