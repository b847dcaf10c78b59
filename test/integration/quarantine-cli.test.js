// `npm run quarantine -- list|export|purge` against the items a real service set aside, and
// `npm run import -- --quarantine`: the round trip a user makes, from a file with bad lines to the
// fixed lines sent again.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { startLocalPostgres, tempDataDir } from '@sluice/db/local-postgres';
import { migrate } from '@sluice/db/migrate';
import { startTestApp } from '../support/app.js';
import { runNode } from '../support/child-process.js';
import { useAppAndDatabase } from '../support/fixture.js';
import { makeUsers, uniqueTag } from '../support/users.js';

const QUARANTINE = fileURLToPath(new URL('../../scripts/quarantine.js', import.meta.url));
const IMPORT = fileURLToPath(new URL('../../scripts/import.js', import.meta.url));
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const ndjson = (/** @type {unknown[]} */ lines) =>
  lines.map((l) => `${typeof l === 'string' ? l : JSON.stringify(l)}\n`).join('');

describe('npm run quarantine, and npm run import --quarantine', () => {
  const ctx = useAppAndDatabase({ LOG_LEVEL: 'warn' });
  /** @type {string} */
  let dir;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-quarantine-cli-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** `npm ARGS` in the repository, as a person types it (on this Node). @param {string[]} args */
  async function npm(args) {
    const PATH = `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH}`;
    const child = spawn('npm', args, {
      cwd: ROOT,
      env: { ...process.env, PATH, DATABASE_URL: ctx.db.url, INGEST_TOKEN: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const [code] = await once(child, 'close');
    return { code, stdout, stderr };
  }

  /** @param {string} script @param {string[]} args */
  async function run(script, args) {
    const child = runNode([script, ...args], {
      env: { ...process.env, DATABASE_URL: ctx.db.url, INGEST_TOKEN: '' },
    });
    return { code: await child.exited, stdout: child.out(), stderr: child.err() };
  }

  test('import --quarantine stores the good lines and says how to export the bad; export --items, fixed, imports; list counts; purge deletes', async () => {
    const tag = uniqueTag();
    const good = makeUsers(3, tag);
    const password = `never-kept-${tag}`;
    const file = path.join(dir, 'users.ndjson');
    await writeFile(
      file,
      ndjson([
        good[0],
        { email: `bad-${tag}`, name: 'Bad' },
        good[1],
        `{"email":"cut-${tag}@example.com","password":"${password}"`,
        good[2],
      ]),
    );

    const imported = await run(IMPORT, [file, '--url', ctx.app.baseUrl, '--quarantine']);
    assert.equal(imported.code, 0, imported.stderr);
    const counts = JSON.parse(imported.stdout);
    assert.equal(counts.inserted, 3);
    assert.equal(counts.quarantined, 2);
    const said =
      /2 users were set aside; to fix and send them again: npm run quarantine -- export --items --request (\S+) --output fixed\.ndjson/.exec(
        imported.stderr,
      );
    assert.ok(said, imported.stderr);
    const requestId = said[1];

    const exported = await run(QUARANTINE, ['export', '--request', requestId]);
    assert.equal(exported.code, 0, exported.stderr);
    const lines = exported.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      lines.map((l) => [l.client, l.requestId, l.format, l.position, l.line, l.reason]),
      [
        ['anonymous', requestId, 'ndjson', 1, 2, 'invalid_user'],
        ['anonymous', requestId, 'ndjson', 3, 4, 'malformed_json'],
      ],
    );
    assert.deepEqual(Object.keys(lines[0]), [
      'id',
      'client',
      'clientScope',
      'requestId',
      'clientRequestId',
      'truncated',
      'receivedAt',
      'format',
      'position',
      'line',
      'reason',
      'errors',
      'item',
    ]);
    assert.deepEqual(
      lines.map((l) => [typeof l.id, l.clientScope, l.clientRequestId, l.truncated]),
      [
        ['number', 'anonymous', null, false],
        ['number', 'anonymous', null, false],
      ],
    );
    assert.ok(lines[0].id < lines[1].id, 'oldest first');
    assert.equal(new Date(lines[0].receivedAt).toISOString(), lines[0].receivedAt);
    assert.deepEqual(lines[0].item, { email: `bad-${tag}`, name: 'Bad' });
    assert.equal(lines[0].errors[0].field, 'email');
    assert.ok(!exported.stdout.includes(password), 'no plaintext password in an export');

    const items = await run(QUARANTINE, ['export', '--items', '--request', requestId]);
    assert.equal(
      items.stdout,
      `{"email":"bad-${tag}","name":"Bad"}\n[not kept: line 4, ${`{"email":"cut-${tag}@example.com","password":"${password}"`.length} characters]\n`,
    );
    // Fixed as a person would, and sent again.
    const fixed = path.join(dir, 'fixed.ndjson');
    await writeFile(
      fixed,
      ndjson([
        { email: `bad-${tag}@example.com`, name: 'Bad' },
        { email: `cut-${tag}@example.com`, name: 'Cut' },
      ]),
    );
    const again = await run(IMPORT, [fixed, '--url', ctx.app.baseUrl, '--quarantine']);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(JSON.parse(again.stdout).inserted, 2);
    assert.equal(again.stderr.includes('set aside'), false);

    // A CSV body's record exports as an object of its header's columns.
    const csv = await ctx.app.postUsers(`name,email\r\nCee,cee-${tag}\r\n`, {
      contentType: 'text/csv',
      headers: { prefer: 'invalid=quarantine' },
    });
    const csvRequest = /** @type {string} */ (csv.headers.get('x-request-id'));
    const csvItems = await run(QUARANTINE, ['export', '--items', '--request', csvRequest]);
    assert.equal(csvItems.stdout, `{"name":"Cee","email":"cee-${tag}"}\n`);

    const listed = await run(QUARANTINE, ['list', '--client', 'anonymous']);
    assert.equal(listed.code, 0, listed.stderr);
    const day = new Date().toISOString().slice(0, 10);
    assert.deepEqual(listed.stdout.trim().split('\n'), [
      'day\tclient\treason\titems',
      `${day}\tanonymous\tinvalid_user\t2`,
      `${day}\tanonymous\tmalformed_json\t1`,
    ]);

    const purged = await run(QUARANTINE, ['purge', '--request', requestId]);
    assert.deepEqual([purged.code, purged.stdout], [0, 'purged 2 items\n']);
    const none = await run(QUARANTINE, ['export', '--request', requestId]);
    assert.equal(none.stdout, '');
    assert.equal(
      (await run(QUARANTINE, ['purge', '--older-than', '1d'])).stdout,
      'purged 0 items\n',
      'what was kept today is younger',
    );
    assert.equal(
      (await run(QUARANTINE, ['purge', '--older-than', '2999-01-01'])).stdout,
      'purged 1 item\n',
    );
  });

  test('the round trip as typed, through npm: export --output holds only the items; fixed, they import and nothing new is set aside', async () => {
    const tag = uniqueTag();
    const file = path.join(dir, 'round-trip.ndjson');
    await writeFile(
      file,
      ndjson([makeUsers(1, tag)[0], { email: `bad-${tag}`, name: 'Bad' }, '{"email":"cut']),
    );
    const imported = await npm([
      'run',
      'import',
      '--',
      file,
      '--url',
      ctx.app.baseUrl,
      '--quarantine',
    ]);
    assert.equal(imported.code, 0, imported.stderr);
    const hint = /npm run (quarantine -- export .*)$/m.exec(imported.stderr);
    assert.ok(hint, imported.stderr);
    const fix = path.join(dir, 'fixed.ndjson');
    // The command the import printed, word for word, but for where the file goes.
    const args = hint[1].split(' ').map((word) => (word === 'fixed.ndjson' ? fix : word));
    const exported = await npm(['run', ...args]);
    assert.equal(exported.code, 0, exported.stderr);
    assert.match(exported.stderr, new RegExp(`exported 2 items to ${fix}`));
    const items = (await readFile(fix, 'utf8')).trim().split('\n');
    // A line that did not parse keeps none of its text (it might hold a password): only where
    // it was and how long, so the person finds it in the source file.
    assert.deepEqual(items, [
      `{"email":"bad-${tag}","name":"Bad"}`,
      '[not kept: line 3, 13 characters]',
    ]);

    // Fixed as a person would (the bad email mended, the cut line taken again from the source and
    // finished), and sent back.
    await writeFile(
      fix,
      ndjson([
        { email: `bad-${tag}@example.com`, name: 'Bad' },
        { email: `cut-${tag}@example.com`, name: 'Cut' },
      ]),
    );
    const kept = async () =>
      (await ctx.db.pool.query('SELECT count(*)::int AS n FROM quarantined_items')).rows[0].n;
    const keptBefore = await kept();
    const again = await npm(['run', 'import', '--', fix, '--url', ctx.app.baseUrl, '--quarantine']);
    assert.equal(again.code, 0, again.stderr);
    const counts = JSON.parse(again.stdout.slice(again.stdout.indexOf('{')));
    assert.deepEqual([counts.inserted, counts.quarantined], [2, 0]);
    assert.equal(await kept(), keptBefore, 'nothing new in the quarantine');
    const stored = await ctx.db.usersByEmail([`bad-${tag}@example.com`, `cut-${tag}@example.com`]);
    assert.deepEqual([...stored.values()].map((u) => u.name).sort(), ['Bad', 'Cut']);
  });

  test("with no DATABASE_URL nor PGHOST, it reads a running npm start's embedded PostgreSQL, whatever its port; with none running, it says so", async () => {
    const dataDir = await tempDataDir('sluice-quarantine-embedded-');
    const env = Object.fromEntries(
      Object.entries(process.env).filter(([k]) => k !== 'DATABASE_URL' && !k.startsWith('PG')),
    );
    const list = async () => {
      const child = runNode([QUARANTINE, 'list'], { env: { ...env, EMBEDDED_PG_DIR: dataDir } });
      return { code: await child.exited, stdout: child.out(), stderr: child.err() };
    };
    const none = await list();
    assert.equal(none.code, 2);
    assert.match(
      none.stderr,
      /no npm start's embedded PostgreSQL runs on .*: start it \(npm start\)/,
    );

    // As npm start runs it: on a port of its own, its service writing there.
    const embedded = await startLocalPostgres({ dataDir, persistent: false });
    try {
      await migrate(embedded.url);
      const app = await startTestApp({ databaseUrl: embedded.url });
      try {
        const kept = await app.postUsers([{ email: 'nope', name: 'No' }], {
          headers: { prefer: 'invalid=quarantine' },
        });
        assert.equal(kept.body?.quarantined, 1, kept.text);
      } finally {
        await app.close();
      }
      const listed = await list();
      assert.equal(listed.code, 0, listed.stderr);
      const day = new Date().toISOString().slice(0, 10);
      assert.equal(
        listed.stdout,
        `day\tclient\treason\titems\n${day}\tanonymous\tinvalid_user\t1\n`,
      );
    } finally {
      await embedded.stop();
    }
  });

  test('purge without --older-than or --request deletes nothing and says why; a bad time is a usage error', async () => {
    const bare = await run(QUARANTINE, ['purge']);
    assert.equal(bare.code, 2);
    assert.match(bare.stderr, /^error: purge needs --older-than or --request/);
    const badTime = await run(QUARANTINE, ['export', '--since', 'yesterday']);
    assert.equal(badTime.code, 2);
    assert.match(badTime.stderr, /--since <time>.*Expected a time ago/);
  });
});
