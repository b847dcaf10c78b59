// `npm run erase` against a real database and the service beside it, sharing its ERASURE_KEY: the
// users named are erased and the absent ones tombstoned, so the service stores none of them again;
// a dry run changes nothing; a bad email or no key stops it before anything is erased; a long list
// goes in batches with progress. What it prints holds counts, never an email.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { useAppAndDatabase } from '../support/fixture.js';
import { makeUsers, uniqueTag } from '../support/users.js';

const ERASE = fileURLToPath(new URL('../../scripts/erase.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const KEY = 'the erase command test key, 40 characters';

describe('npm run erase', () => {
  const ctx = useAppAndDatabase({ ERASURE_KEY: KEY, LOG_LEVEL: 'warn' });
  /** @type {string} */
  let dir;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-erase-cli-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /**
   * The command (`npm run -s erase --` with `npm`), `input` on its stdin.
   * @param {string[]} args
   * @param {{ env?: Record<string, string | undefined>, input?: string, npm?: boolean }} [options]
   */
  async function erase(args, { env = {}, input, npm = false } = {}) {
    const PATH = `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH}`;
    const [command, ...words] = npm
      ? ['npm', 'run', '-s', 'erase', '--', ...args]
      : [process.execPath, ERASE, ...args];
    const child = spawn(command, words, {
      cwd: ROOT,
      env: { ...process.env, PATH, DATABASE_URL: ctx.db.url, ERASURE_KEY: KEY, ...env },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.stdin.end(input ?? '');
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const [code] = await once(child, 'close');
    return { code, stdout, stderr };
  }

  /** @param {string[]} emails @returns {Promise<string[]>} those of them stored */
  const stored = async (emails) =>
    (
      await ctx.db.pool.query('SELECT email FROM users WHERE email = ANY($1) ORDER BY email', [
        emails,
      ])
    ).rows.map((r) => r.email);
  /** @param {string[]} emails @returns {Promise<number>} how many of them have a tombstone */
  const tombstoned = async (emails) =>
    (
      await ctx.db.pool.query(
        'SELECT count(*)::int AS n FROM erasures WHERE email_hmac = ANY($1::bytea[])',
        [emails.map((e) => createHmac('sha256', KEY).update(e).digest())],
      )
    ).rows[0].n;
  const allTombstones = async () =>
    (await ctx.db.pool.query('SELECT count(*)::int AS n FROM erasures')).rows[0].n;

  /** @param {{ stdout: string, stderr: string }} run @param {string} tag  in every email */
  const assertNoEmail = ({ stdout, stderr }, tag) => {
    assert.doesNotMatch(stdout + stderr, new RegExp(tag, 'i'), 'an email was printed');
    assert.doesNotMatch(stdout + stderr, /example\.com/, 'an email was printed');
  };

  test('erases the stored users, tombstones the absent ones: the service stores none of them again', async () => {
    const tag = uniqueTag();
    const users = makeUsers(3, tag);
    assert.equal((await ctx.app.postUsers(users)).status, 201);
    const absent = `absent-${tag}@example.com`;

    const run = await erase([users[0].email, users[1].email.toUpperCase(), absent]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, 'received 3, erased 2, absent 1\n');
    assert.equal(run.stderr, '');
    assertNoEmail(run, tag);
    const emails = [...users.map((u) => u.email), absent];
    assert.deepEqual(await stored(emails), [users[2].email]);
    assert.equal(await tombstoned([users[0].email, users[1].email, absent]), 3);

    // A replay of the erased and of the absent one: not stored, under the service's own key.
    const replay = await ctx.app.postUsers([users[0], { email: absent, name: 'Late' }]);
    assert.equal(replay.status, 200, replay.text);
    assert.equal(replay.body.inserted, 0);
    assert.deepEqual(await stored(emails), [users[2].email]);
  });

  test('--changed-at: the tombstone holds that time, so a newer write is stored again and an older is not', async () => {
    const tag = uniqueTag();
    const [user] = makeUsers(1, tag);
    assert.equal((await ctx.app.postUsers([user])).status, 201);
    const run = await erase([user.email, '--changed-at', '2026-03-01T12:00:00+01:00']);
    assert.deepEqual([run.code, run.stdout], [0, 'received 1, erased 1, absent 0\n']);
    const older = await ctx.app.postUsers([{ ...user, changedAt: '2026-03-01T10:59:59Z' }]);
    assert.equal(older.body.inserted, 0, older.text);
    const newer = await ctx.app.postUsers([{ ...user, changedAt: '2026-03-01T11:00:01Z' }]);
    assert.equal(newer.body.inserted, 1, newer.text);

    const bad = await erase([user.email, '--changed-at', 'yesterday']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /^error: option '--changed-at <time>' must be /);
    assert.deepEqual(await stored([user.email]), [user.email]);
  });

  test('--dry-run counts the stored and the absent, and changes nothing', async () => {
    const tag = uniqueTag();
    const users = makeUsers(2, tag);
    assert.equal((await ctx.app.postUsers(users)).status, 201);
    const before = await allTombstones();
    const absent = `absent-${tag}@example.com`;

    const run = await erase(['--dry-run', users[0].email, users[1].email, absent, users[0].email]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(
      run.stdout,
      'received 4, would erase 2, absent 1 (a dry run: nothing changed; ' +
        'a tombstone would be recorded for each of the 3 emails)\n',
    );
    assertNoEmail(run, tag);
    assert.equal((await stored(users.map((u) => u.email))).length, 2);
    assert.equal(await allTombstones(), before);
  });

  test('a bad email: exit 2 naming its position, never its text, and nothing erased', async () => {
    const tag = uniqueTag();
    const users = makeUsers(2, tag);
    assert.equal((await ctx.app.postUsers(users)).status, 201);
    const before = await allTombstones();

    const run = await erase([users[0].email, `not-an-email-${tag}`, users[1].email]);
    assert.equal(run.code, 2);
    assert.equal(run.stdout, '');
    assert.match(
      run.stderr,
      /^erase: 1 of 3 erasures are invalid; nothing was erased\n {2}argument 2: email must be a plausible email address/,
    );
    assertNoEmail(run, tag);

    const file = path.join(dir, `bad-${tag}.txt`);
    await writeFile(file, `# people\n${users[0].email}\n\nbad@@${tag}\n`);
    const fromFile = await erase(['--file', file]);
    assert.equal(fromFile.code, 2);
    assert.match(fromFile.stderr, /\n {2}line 4: email must be /);
    assertNoEmail(fromFile, tag);

    assert.equal((await stored(users.map((u) => u.email))).length, 2, 'nothing erased');
    assert.equal(await allTombstones(), before, 'no tombstone recorded');
  });

  test('a file with comments, blank lines, CRLF and repeats, through npm and from stdin', async () => {
    const tag = uniqueTag();
    const users = makeUsers(4, tag);
    assert.equal((await ctx.app.postUsers(users)).status, 201);
    const file = path.join(dir, `list-${tag}.txt`);
    await writeFile(
      file,
      `# erasure requests, ticket ${tag}\r\n\r\n  ${users[0].email}  \r\n` +
        `${users[1].email}\r\n   # handled twice\r\n${users[0].email.toUpperCase()}\r\n`,
    );
    const run = await erase(['--file', file], { npm: true });
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, 'received 3, erased 2, absent 0\n');
    assert.equal(run.stderr, '');

    const piped = await erase(['--file', '-'], {
      input: `# from stdin\n${users[2].email}\n${users[3].email}\n`,
    });
    assert.deepEqual([piped.code, piped.stdout], [0, 'received 2, erased 2, absent 0\n']);
    assert.deepEqual(await stored(users.map((u) => u.email)), []);

    const empty = path.join(dir, `empty-${tag}.txt`);
    await writeFile(empty, '# nobody\n\n');
    const none = await erase(['--file', empty]);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /lists no email; nothing was erased\n$/);
    const missing = await erase(['--file', path.join(dir, 'no-such-file')]);
    assert.equal(missing.code, 2);
    assert.match(
      missing.stderr,
      /^erase: cannot read .*no-such-file \(ENOENT\); nothing was erased\n$/,
    );
  });

  test('a long list goes in batches of 10,000, with progress on stderr', async () => {
    const tag = uniqueTag();
    const [user] = makeUsers(1, tag);
    assert.equal((await ctx.app.postUsers([user])).status, 201);
    const absent = Array.from({ length: 10_000 }, (_, i) => `gone-${i}-${tag}@example.com`);
    const file = path.join(dir, `long-${tag}.txt`);
    await writeFile(file, `${[...absent, user.email].join('\n')}\n`);

    const run = await erase(['--file', file]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, 'received 10001, erased 1, absent 10000\n');
    assert.equal(run.stderr, 'erased 10000 of 10001\nerased 10001 of 10001\n');
    assert.deepEqual(await stored([user.email]), []);
    assert.equal(await tombstoned([absent[0], absent[9_999], user.email]), 3);
  });

  test('without a key, or with a database that cannot be reached: one line, no stack, nothing erased', async () => {
    const tag = uniqueTag();
    const [user] = makeUsers(1, tag);
    assert.equal((await ctx.app.postUsers([user])).status, 201);

    const keyless = await erase([user.email], { env: { ERASURE_KEY: undefined } });
    assert.equal(keyless.code, 2);
    assert.equal(
      keyless.stderr,
      'erase: bad configuration: ERASURE_KEY is unset, as is ERASURE_KEY_FILE: ' +
        'give the key the service erases with\n',
    );
    const short = await erase([user.email], { env: { ERASURE_KEY: 'short' } });
    assert.equal(short.code, 2);
    assert.match(short.stderr, /^erase: bad configuration: ERASURE_KEY must be at least 32/);
    assert.deepEqual(await stored([user.email]), [user.email]);

    const down = await erase([user.email], {
      env: { DATABASE_URL: 'postgres://someone:hunter2secret@127.0.0.1:1/nowhere' },
    });
    assert.equal(down.code, 1);
    assert.match(down.stderr, /^erase: failed: .*ECONNREFUSED/);
    assert.equal(down.stderr.split('\n').length, 2, down.stderr);
    assert.doesNotMatch(down.stderr, /hunter2secret|\n\s+at /);
    assertNoEmail(down, tag);
  });
});
