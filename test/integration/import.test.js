// `npm run import`'s report: progress and rows/s only for an upload that is going, one line for a
// refusal or a failure, and a refusal saying how much of the file had been sent.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { runNode } from '../support/child-process.js';
import { useAppAndDatabase } from '../support/fixture.js';
import { makeUsers } from '../support/users.js';

const IMPORT = fileURLToPath(new URL('../../scripts/import.js', import.meta.url));
const ndjson = (/** @type {object[]} */ users) =>
  users.map((u) => `${JSON.stringify(u)}\n`).join('');
/** @param {string[]} args */
async function runImport(args) {
  const run = runNode([IMPORT, ...args], { env: { ...process.env, INGEST_TOKEN: '' } });
  return { code: await run.exited, stdout: run.out(), stderr: run.err() };
}

describe('npm run import: what it reports', () => {
  const ctx = useAppAndDatabase({ LOG_LEVEL: 'warn' });
  /** @type {string} */
  let dir;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-import-report-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test('--help names every column a CSV header may hold, changedAt included', async () => {
    const help = await runImport(['--help']);
    assert.equal(help.code, 0);
    assert.match(
      help.stdout.replace(/\s+/g, ' '),
      /a header row naming email, name, phone, passwordHash, changedAt\)/,
    );
  });

  test('a line refused halfway: one line, the refusal and how much was sent (no less than up to that line), no rows/s', async () => {
    const users = makeUsers(40_000);
    const head = ndjson(users.slice(0, 20_000));
    const file = path.join(dir, 'bad-halfway.ndjson');
    await writeFile(file, `${head}{"email": oops}\n${ndjson(users.slice(20_000))}`);
    const refused = await runImport([file, '--url', ctx.app.baseUrl]);
    assert.equal(refused.code, 1, refused.stderr);
    assert.equal(refused.stdout, '');
    const lines = refused.stderr.trim().split('\n');
    assert.equal(lines.length, 1, refused.stderr);
    const said =
      /^import refused \(400\): \{.*"malformed_json".*\} \((\d+\.\d) MB of (\d+\.\d) MB sent, (\d+)%; the rest not sent\)$/.exec(
        lines[0],
      );
    assert.ok(said, lines[0]);
    const [sent, total] = [Number(said[1]), Number(said[2])];
    assert.ok(
      sent >= Math.floor(Buffer.byteLength(head) / 1e5) / 10,
      `the service read up to the bad line, so at least that was sent: ${lines[0]}`,
    );
    assert.ok(sent <= total);
    assert.doesNotMatch(refused.stderr, /rows\/s/);
    assert.equal(await ctx.db.countUsers(), 0);
  });

  test('no service there: one line, nothing counted as sent, no rows/s', async () => {
    const file = path.join(dir, 'users.ndjson');
    await writeFile(file, ndjson(makeUsers(10)));
    // Port 1 on loopback: nothing listens.
    const failed = await runImport([file, '--url', 'http://127.0.0.1:1']);
    assert.equal(failed.code, 1);
    assert.match(
      failed.stderr,
      /^import failed after 0 bytes: connect ECONNREFUSED 127\.0\.0\.1:1 \(is the service running at http:\/\/127\.0\.0\.1:1\? `npm start` starts it; --url names another\)\n$/,
    );
  });
});

describe('npm run import: a client over its rate', () => {
  const TOKEN = 'tok-import-limited';
  const ctx = useAppAndDatabase({
    LOG_LEVEL: 'warn',
    INGEST_TOKENS: JSON.stringify({ importer: { token: TOKEN, rate: 1000, burst: 1000 } }),
  });
  /** @type {string} */
  let dir;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-import-rate-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  test('told 429, it says so, waits Retry-After and sends the file again: all stored once', async () => {
    // The bucket emptied first: the import's first answer is a 429.
    assert.equal((await ctx.app.postUsers(makeUsers(1500), { token: TOKEN })).status, 201);
    const users = makeUsers(500);
    const file = path.join(dir, 'users.ndjson');
    await writeFile(file, ndjson(users));
    const run = runNode([IMPORT, file, '--url', ctx.app.baseUrl, '--token', TOKEN], {
      env: { ...process.env, INGEST_TOKEN: '' },
    });
    const code = await run.exited;
    assert.equal(code, 0, run.err());
    assert.match(
      run.err(),
      /^import: this client is over its rate \(429\), nothing written; waiting \d+ s as Retry-After asks, then sending the file again$/m,
    );
    assert.equal(JSON.parse(run.out()).inserted, 500);
    assert.equal((await ctx.db.usersByEmail(users.map((u) => u.email))).size, 500);
  });
});
