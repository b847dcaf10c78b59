// The database of a running `npm start` when none is configured: its embedded PostgreSQL, whose
// port changes at every start, found as `npm run pgbouncer` finds it (the data directory's
// postmaster.pid).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { localPostgresUrl, postgresHolding } from '@sluice/db/local-postgres';
import { loadEnv } from '@sluice/env';
import { START_VARIABLES } from './start-config.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** What a command that falls back to npm start's database reads, for its --help. */
export const EMBEDDED_DIR_VARIABLES = { EMBEDDED_PG_DIR: START_VARIABLES.EMBEDDED_PG_DIR };

/**
 * EMBEDDED_PG_DIR, absolute (a relative one is in the repository).
 * @param {NodeJS.ProcessEnv} env
 */
export const embeddedDataDir = (env) =>
  path.resolve(root, loadEnv(EMBEDDED_DIR_VARIABLES, env).EMBEDDED_PG_DIR);

/** A path as a person reads it: relative to the repository when it is inside. @param {string} p */
export const shownPath = (p) =>
  path.relative(root, p).startsWith('..') ? p : path.relative(root, p);

/**
 * The URL of the embedded PostgreSQL that holds EMBEDDED_PG_DIR now, or why there is none.
 * @param {NodeJS.ProcessEnv} env
 * @returns {Promise<{ url: string } | { problem: string }>}
 */
export async function runningEmbeddedDatabase(env) {
  const dataDir = embeddedDataDir(env);
  const shown = shownPath(dataDir);
  const holder = await postgresHolding(dataDir);
  if (!holder) return { problem: `no npm start's embedded PostgreSQL runs on ${shown}` };
  if (!holder.port)
    return { problem: `the PostgreSQL holding ${shown} (PID ${holder.pid}) does not say its port` };
  return { url: localPostgresUrl(holder.port) };
}
