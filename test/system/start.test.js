import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmod, mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { stripVTControlCharacters } from 'node:util';
import { describe, test } from 'node:test';
import pg from 'pg';
import { runNode } from '../support/child-process.js';
import { useAppAndDatabase } from '../support/fixture.js';
import { waitUntil } from '../support/wait.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const START = path.join(root, 'scripts', 'start.js');
const ERASE = path.join(root, 'scripts', 'erase.js');
const REFUSE_TO_START = path.join(root, 'test', 'support', 'refuse-to-start.js');
const NO_HANG_MS = 20_000;
/** @param {string} s */
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
// Colours and the terminal's carriage returns, so the text can be matched.
const plain = (/** @type {string} */ s) => stripVTControlCharacters(s).replace(/\r/g, '');

/**
 * Runs `npm start`'s script until the service says it listens, then stops it with SIGTERM.
 * @param {string[]} argv  the command: the script itself, or wrapped to run in a terminal
 * @param {string} databaseUrl
 * @returns {Promise<string>} what it printed on stdout up to then
 */
async function startUntilListening(argv, databaseUrl) {
  const child = spawn(argv[0], argv.slice(1), {
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c) => (out += c));
  child.stderr.resume();
  const exited = new Promise((resolve) => child.on('exit', resolve));
  try {
    await new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`no "listening" in ${NO_HANG_MS} ms; got:\n${out}`)),
        NO_HANG_MS,
      );
      child.stdout.on('data', () => {
        if (plain(out).includes('listening')) {
          clearTimeout(timer);
          resolve(undefined);
        }
      });
    });
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
  return plain(out);
}

describe('npm start: logs for people in a terminal, JSON everywhere else', () => {
  const ctx = useAppAndDatabase();

  test('it says where the service listens: loopback without a credential; every interface, and why, with one', async () => {
    for (const [env, host, why] of /** @type {const} */ ([
      [{}, '127.0.0.1', 'loopback only: no credential is required; HOST changes it'],
      [
        { INGEST_TOKEN: 'start-test-token-0123456789' },
        '0.0.0.0',
        'every interface: a credential is required and HOST is unset; HOST=127.0.0.1 keeps it on loopback',
      ],
    ])) {
      const run = runStart({ DATABASE_URL: ctx.db.url, PORT: '0', LOG_LEVEL: 'info', ...env });
      try {
        await waitUntil(
          () => run.out().includes('"listening"') || run.child.exitCode !== null,
          'npm start to listen',
          30_000,
        );
        const lines = run.err().split('\n');
        assert.ok(
          lines.includes(`sluice: the service listens on http://${host}:<a free port> (${why})`),
          run.err(),
        );
        const listening = run
          .out()
          .split('\n')
          .find((l) => l.includes('"listening"'));
        assert.equal(JSON.parse(/** @type {string} */ (listening)).host, host);
      } finally {
        run.child.kill('SIGTERM');
        await run.exited;
      }
    }
  });

  test('piped: every line on stdout is pino JSON', async () => {
    const out = await startUntilListening([process.execPath, START], ctx.db.url);
    const lines = out.split('\n').filter(Boolean);
    assert.ok(lines.length > 0);
    const parsed = lines.map((l) => JSON.parse(l));
    assert.ok(parsed.some((l) => l.msg === 'listening' && l.level === 30));
  });

  test('in a terminal: readable lines from pino-pretty, not JSON', async () => {
    // util-linux `script` gives the command a pseudo-terminal, as a person's shell would.
    const out = await startUntilListening(
      ['script', '-qfec', `${process.execPath} ${START}`, '/dev/null'],
      ctx.db.url,
    );
    const line = out.split('\n').find((l) => l.includes('listening')) ?? '';
    assert.match(line, /^\[\d{2}:\d{2}:\d{2}\.\d{3}\] INFO \(\d+\): listening$/);
    assert.match(out, /\n\s+port: \d+\n/, 'the fields follow on their own lines');
    assert.throws(() => JSON.parse(line));
  });
});

/**
 * `npm start`'s script with this environment (on top of the test's, less what would choose for it).
 * @param {Record<string, string>} env @param {string[]} [args] @param {string[]} [nodeOptions]
 */
function runStart(env, args = [], nodeOptions = []) {
  const base = { ...process.env };
  for (const name of [
    'DATABASE_URL',
    'PORT',
    'HOST',
    'INGEST_TOKEN',
    'EMBEDDED_PG_PORT',
    'EMBEDDED_PG_DIR',
    'ERASURE_KEY',
    'ERASURE_KEY_FILE',
  ])
    delete base[name];
  return runNode([...nodeOptions, START, ...args], {
    cwd: root,
    env: { ...base, LOG_LEVEL: 'warn', ...env },
  });
}

/** @param {string} stderr  what the command printed: no line of a stack trace */
const assertNoStack = (stderr) => {
  assert.doesNotMatch(stderr, /^\s+at .+[:(]/m, `a stack trace:\n${stderr}`);
  assert.doesNotMatch(stderr, /triggerUncaughtException|node:internal|Node\.js v\d/, stderr);
};

/** Holds a port on 127.0.0.1, as another program would. @returns {Promise<net.Server>} */
const holdPort = () =>
  new Promise((resolve) => {
    const server = net.createServer();
    server.listen(0, '127.0.0.1', () => resolve(server));
  });

describe('npm start: each start-up failure is one line naming the cause and the fix, exit 1, nothing left running', () => {
  const ctx = useAppAndDatabase();

  test('bad variables of npm start, of the service and of tracing: all named in one line, before anything starts', async () => {
    const run = runStart(
      {
        EMBEDDED_PG_PORT: '99999',
        PORT: 'x',
        MAX_BATCH_ITEMS: '0',
        OTEL_TRACES_EXPORTER: 'zipkin',
      },
      [],
      ['--import', REFUSE_TO_START],
    );
    assert.equal(await run.exited, 1, run.err());
    assert.doesNotMatch(run.err(), /refuse-to-start/, 'it started something before checking');
    const lines = run.err().trim().split('\n');
    assert.equal(lines.length, 1, run.err());
    assert.match(
      lines[0],
      /^sluice: bad configuration: EMBEDDED_PG_PORT .*; PORT .*; MAX_BATCH_ITEMS .*; OTEL_TRACES_EXPORTER /,
    );
  });

  test('a port in use: one line naming it and PORT, before the database is touched', async () => {
    const holder = await holdPort();
    const { port } = /** @type {net.AddressInfo} */ (holder.address());
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-start-'));
    try {
      // DATABASE_URL unset: the embedded PostgreSQL is not started, its data directory not made.
      const run = runStart({ PORT: String(port), EMBEDDED_PG_DIR: path.join(dir, 'pg') });
      assert.equal(await run.exited, 1, run.err());
      assert.equal(
        run.err(),
        `sluice: port ${port} on 127.0.0.1 is in use by another process (another \`npm start\`?): stop it, or set PORT to a free port (PORT=0: any free port)\n`,
      );
      assert.deepEqual(await readdir(dir), []);
      // The service alone says the same.
      const service = runNode([path.join(root, 'service/src/server.js')], {
        env: {
          ...process.env,
          DATABASE_URL: ctx.db.url,
          HOST: '127.0.0.1',
          PORT: String(port),
          LOG_LEVEL: 'silent',
        },
      });
      assert.equal(await service.exited, 1, service.err());
      assert.match(
        service.err(),
        new RegExp(`^sluice: port ${port} on 127\\.0\\.0\\.1 is in use by another process`),
      );
      assertNoStack(service.err());
      // And its cluster's primary, once, rather than each worker and its replacements.
      const cluster = runNode([path.join(root, 'service/src/server.js')], {
        env: {
          ...process.env,
          DATABASE_URL: ctx.db.url,
          HOST: '127.0.0.1',
          PORT: String(port),
          WORKERS: '2',
          LOG_LEVEL: 'silent',
        },
      });
      assert.equal(await cluster.exited, 1, cluster.err());
      assert.equal(cluster.err(), service.err());
    } finally {
      holder.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('a database that cannot be reached: one line, without the password', async () => {
    const run = runStart({
      DATABASE_URL: 'postgres://someone:hunter2secret@127.0.0.1:1/nowhere',
      PORT: '0',
    });
    assert.equal(await run.exited, 1, run.err());
    assert.equal(
      run.err(),
      'sluice: cannot migrate the database of DATABASE_URL (127.0.0.1:1): connect ECONNREFUSED 127.0.0.1:1\n',
    );
  });

  test('a Node older than 22: a warning naming the version needed, first', async () => {
    const oldNode =
      'data:text/javascript,Object.defineProperty(process.versions,"node",{value:"20.11.1"})';
    const run = runStart({}, ['--help'], ['--import', oldNode]);
    assert.equal(await run.exited, 0, run.err());
    assert.match(
      run.err(),
      /^sluice: warning: Node 20\.11\.1 is older than Node 22, which sluice needs .*install Node 22/,
    );
    assert.match(run.out(), /^Usage: npm start/);
  });

  test('the embedded PostgreSQL: its connection string printed; a second npm start on its data directory is one line naming it and the PID', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-start-'));
    // As root, PostgreSQL runs as the postgres user, which must be able to enter the folder.
    await chmod(dir, 0o755);
    const env = { EMBEDDED_PG_DIR: path.join(dir, 'pg'), PORT: '0', LOG_LEVEL: 'info' };
    const first = runStart(env);
    try {
      await waitUntil(
        () => first.out().includes('"listening"') || first.child.exitCode !== null,
        'the first npm start to listen',
        60_000,
      );
      const said =
        /^sluice: embedded PostgreSQL at (postgres:\/\/postgres:postgres@127\.0\.0\.1:(\d+)\/postgres) /m.exec(
          first.err(),
        );
      assert.ok(said, first.err());
      const client = new pg.Client({ connectionString: said[1] });
      await client.connect();
      assert.equal(
        (await client.query('SELECT count(*)::int AS n FROM users')).rows[0].n,
        0,
        'the login works, the schema is there',
      );
      await client.end();

      const second = runStart(env);
      assert.equal(await second.exited, 1, second.err());
      const lines = second.err().trim().split('\n');
      assert.match(
        lines.at(-1) ?? '',
        new RegExp(
          `^sluice: ${escape(env.EMBEDDED_PG_DIR)} is in use by another \`npm start\` \\(its PostgreSQL has PID \\d+ on port ${said[2]}\\): stop that one .*EMBEDDED_PG_DIR`,
        ),
      );
      assertNoStack(second.err());

      // A data directory of its own, but the first one's PostgreSQL port.
      const third = runStart({
        ...env,
        EMBEDDED_PG_DIR: path.join(dir, 'pg2'),
        EMBEDDED_PG_PORT: said[2],
      });
      assert.equal(await third.exited, 1, third.err());
      assert.match(
        third.err().trim().split('\n').at(-1) ?? '',
        new RegExp(
          `^sluice: the embedded PostgreSQL cannot listen on port ${said[2]} of 127\\.0\\.0\\.1: another process holds it; set EMBEDDED_PG_PORT to another`,
        ),
      );
      assertNoStack(third.err());
    } finally {
      first.child.kill('SIGTERM');
      assert.equal(await first.exited, 0, first.err());
      await rm(dir, { recursive: true, force: true });
    }
    assert.match(first.err(), /stopping the embedded PostgreSQL/);
  });
});

describe('npm start on the embedded PostgreSQL keeps an erasure key beside its data', () => {
  /**
   * npm start on `env` until it listens: its run and its service's address.
   * @param {Record<string, string>} env
   */
  async function started(env) {
    const run = runStart(env);
    await waitUntil(
      () => run.out().includes('"listening"') || run.child.exitCode !== null,
      'npm start to listen',
      60_000,
    );
    const listening = run
      .out()
      .split('\n')
      .find((l) => l.includes('"listening"'));
    assert.ok(listening, run.err());
    return { run, url: `http://127.0.0.1:${JSON.parse(listening).port}` };
  }
  /** @param {ReturnType<typeof runStart>} run */
  async function stop(run) {
    run.child.kill('SIGTERM');
    assert.equal(await run.exited, 0, run.err());
  }
  /** @param {string} url @param {string} path @param {unknown} body */
  const post = async (url, path, body) => {
    const res = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  };

  test('made once (0600, never printed) and passed to the service; the same at the next start; npm run erase finds it; none made when a key is given', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-start-key-'));
    // As root, PostgreSQL runs as the postgres user, which must be able to enter the folder.
    await chmod(dir, 0o755);
    const env = { EMBEDDED_PG_DIR: path.join(dir, 'pg'), PORT: '0', LOG_LEVEL: 'info' };
    const keyFile = path.join(dir, 'erasure.key');
    const user = { email: 'kept-key@example.com', name: 'Kept' };
    try {
      const first = await started(env);
      let key;
      try {
        assert.ok(
          first.run.err().split('\n').includes(`sluice: erasure key kept in ${keyFile}`),
          first.run.err(),
        );
        assert.equal((await stat(keyFile)).mode & 0o777, 0o600);
        key = await readFile(keyFile, 'utf8');
        assert.match(key, /^[0-9a-f]{64}$/);
        assert.ok(!(first.run.out() + first.run.err()).includes(key), 'the key was printed');

        assert.equal((await post(first.url, '/users', [user])).status, 201);
        const erased = await post(first.url, '/erasures', [{ email: user.email }]);
        assert.deepEqual(erased, { status: 200, body: { received: 1, erased: 1, absent: 0 } });

        // npm run erase on the same data, no database nor key configured: npm start's own.
        const other = { email: 'kept-key-2@example.com', name: 'Other' };
        assert.equal((await post(first.url, '/users', [other])).status, 201);
        const cli = runNode([ERASE, other.email], {
          cwd: root,
          env: { ...withoutDatabase(), EMBEDDED_PG_DIR: env.EMBEDDED_PG_DIR },
        });
        assert.equal(await cli.exited, 0, cli.err());
        assert.equal(cli.out(), 'received 1, erased 1, absent 0\n');
        const replay = await post(first.url, '/users', [other]);
        assert.equal(replay.body.inserted, 0, 'its tombstone is keyed as the service keys');
      } finally {
        await stop(first.run);
      }

      const second = await started(env);
      try {
        assert.doesNotMatch(second.run.err(), /erasure key kept/);
        assert.equal(await readFile(keyFile, 'utf8'), key);
        // The tombstone made under the first start's key still holds.
        const replay = await post(second.url, '/users', [user]);
        assert.deepEqual([replay.status, replay.body.inserted], [200, 0]);
      } finally {
        await stop(second.run);
      }

      await rm(keyFile);
      const given = await started({ ...env, ERASURE_KEY: 'a key of its own, 32 characters long' });
      try {
        assert.doesNotMatch(given.run.err(), /erasure key kept/);
        const erased = await post(given.url, '/erasures', [{ email: 'someone@example.com' }]);
        assert.equal(erased.status, 200);
        assert.deepEqual(await readdir(dir), ['pg'], 'no key file made');
      } finally {
        await stop(given.run);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

/** The test's environment without a database or an erasure key configured. */
function withoutDatabase() {
  return Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => k !== 'DATABASE_URL' && !k.startsWith('PG') && !k.startsWith('ERASURE_KEY'),
    ),
  );
}
