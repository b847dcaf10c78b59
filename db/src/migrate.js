import { fileURLToPath } from 'node:url';
import { runner } from 'node-pg-migrate';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations', import.meta.url));
export const MIGRATIONS_TABLE = 'pgmigrations';

/**
 * Applies every pending migration in one transaction, under node-pg-migrate's advisory lock, so
 * that several processes starting at once (cluster workers, containers) migrate exactly once.
 *
 * @param {string} databaseUrl
 * @param {{ log?: (msg: string) => void }} [options]
 * @returns {Promise<string[]>} the names of the migrations applied now
 */
export async function migrate(databaseUrl, { log = () => {} } = {}) {
  const applied = await runner({
    databaseUrl,
    dir: MIGRATIONS_DIR,
    direction: 'up',
    migrationsTable: MIGRATIONS_TABLE,
    singleTransaction: true,
    checkOrder: true,
    log,
    logger: { debug() {}, info: log, warn: log, error: log },
  });
  return applied.map((m) => m.name);
}
