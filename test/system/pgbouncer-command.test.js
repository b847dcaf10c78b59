import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import { freePort, postgresHolding } from '@sluice/db/local-postgres';
import { pgbouncerBinary } from '../support/pgbouncer.js';
import { waitUntil } from '../support/wait.js';

// docs/scaling.md's "A pooler on one machine", followed: `npm run pgbouncer` (on a free port and a
// data directory of its own), the `npm start` line it prints, the section's curl, and the pooler's
// SHOW POOLS; the files it wrote are the section's pgbouncer.ini and auth file.

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SECTION = '## A pooler on one machine';

/** The section's fenced blocks, by language. @param {string} markdown */
function blocksOf(markdown) {
  const start = markdown.indexOf(SECTION);
  const section = markdown.slice(start, markdown.indexOf('\n## ', start + SECTION.length));
  return [...section.matchAll(/```(\w+)\n([\s\S]*?)```/g)].map(([, lang, body]) => ({
    lang,
    body,
  }));
}

/**
 * A command run by sh in the repository, its output kept.
 * @param {string} command @param {Record<string, string>} env
 */
function run(command, env) {
  const child = spawn('sh', ['-c', command], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const proc = { child, out: '', exited: new Promise((resolve) => child.on('exit', resolve)) };
  child.stdout.on('data', (c) => (proc.out += c));
  child.stderr.on('data', (c) => (proc.out += c));
  return proc;
}

/** SIGINT to the command's whole process group, as Ctrl-C in its terminal. @param {ReturnType<typeof run>} proc */
async function interrupt(proc) {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null) return;
  process.kill(-(/** @type {number} */ (proc.child.pid)), 'SIGINT');
  await proc.exited;
}

describe("docs/scaling.md's local PgBouncer, followed", () => {
  /** @type {ReturnType<typeof run>[]} */
  const started = [];
  /** @type {string} */ let dir;
  after(async () => {
    for (const proc of started.reverse()) await interrupt(proc);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test("npm run pgbouncer, the npm start line it prints, a request through the pooler; its files are the docs'", async () => {
    pgbouncerBinary();
    const doc = blocksOf(await readFile(path.join(root, 'docs/scaling.md'), 'utf8'));
    const [first, second] = doc
      .filter((b) => b.lang === 'sh')
      .map((b) => b.body.split('\n').filter((l) => l && !l.startsWith('#')));
    const ini = doc.find((b) => b.lang === 'ini')?.body;
    const authFile = doc.find((b) => b.lang === 'text')?.body;
    assert.deepEqual(first, ['npm run pgbouncer']);
    assert.ok(ini && authFile, 'the section shows pgbouncer.ini and the auth file');

    dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-pgbouncer-doc-'));
    await chmod(dir, 0o755);
    const [poolerPort, servicePort] = [await freePort(), await freePort()];
    const pooler = run(`${first[0]} -- --port ${poolerPort}`, {
      EMBEDDED_PG_DIR: path.join(dir, 'postgres'),
    });
    started.push(pooler);
    await waitUntil(
      () => pooler.out.includes('npm start\n') || pooler.child.exitCode !== null,
      'npm run pgbouncer printed the npm start line',
      60_000,
    );
    const printed = /^ {2}(DATABASE_URL=\S+ DIRECT_DATABASE_URL=\S+ npm start)$/m.exec(
      pooler.out,
    )?.[1];
    assert.ok(printed, pooler.out);
    const upstreamPort = Number(
      /DIRECT_DATABASE_URL=postgres:\/\/postgres:postgres@127\.0\.0\.1:(\d+)\//.exec(printed)?.[1],
    );

    // The section's lines are what it printed, but for the ports.
    const ports = (/** @type {string} */ text) =>
      text
        .replaceAll(':6432', `:${poolerPort}`)
        .replaceAll('= 6432', `= ${poolerPort}`)
        .replaceAll('PORT', String(upstreamPort));
    assert.equal(ports(second[0]), printed);
    assert.equal(await readFile(path.join(dir, 'pgbouncer', 'pgbouncer.ini'), 'utf8'), ports(ini));
    assert.equal(await readFile(path.join(dir, 'pgbouncer', 'userlist.txt'), 'utf8'), authFile);

    const service = run(printed, {
      PORT: String(servicePort),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
    });
    started.push(service);
    await waitUntil(
      () => service.out.includes('"listening"') || service.child.exitCode !== null,
      'the service listened',
      60_000,
    );
    assert.equal(service.child.exitCode, null, service.out);

    const curl = second.find((l) => l.startsWith('curl '));
    assert.ok(curl);
    const answer = run(curl.replace('127.0.0.1:3000', `127.0.0.1:${servicePort}`), {});
    await answer.exited;
    const expected = doc
      .filter((b) => b.lang === 'sh')[1]
      .body.split('\n')
      .find((l) => l.startsWith('# {'))
      ?.slice(2);
    assert.deepEqual(JSON.parse(answer.out), JSON.parse(/** @type {string} */ (expected)));

    const admin = new pg.Client({
      connectionString: `postgres://postgres:postgres@127.0.0.1:${poolerPort}/pgbouncer`,
    });
    await admin.connect();
    try {
      const pools = (await admin.query('SHOW POOLS')).rows;
      assert.equal(pools.find((p) => p.database === 'postgres')?.pool_mode, 'transaction');
      const stats = (await admin.query('SHOW STATS')).rows.find((r) => r.database === 'postgres');
      assert.ok(Number(stats?.total_xact_count) > 0, 'the write went through the pooler');
    } finally {
      await admin.end();
    }

    await interrupt(service);
    await interrupt(pooler);
    assert.match(pooler.out, /got SIGTERM, fast exit/, 'Ctrl-C stopped PgBouncer');
    await waitUntil(
      async () => (await postgresHolding(path.join(dir, 'postgres'))) === undefined,
      'and the embedded PostgreSQL it started',
      30_000,
    );
  });
});
