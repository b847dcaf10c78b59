import { fileURLToPath } from 'node:url';
import { runner } from 'node-pg-migrate';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations', import.meta.url));
export const MIGRATIONS_TABLE = 'pgmigrations';

/**
 * Applies every pending migration in one transaction, under node-pg-migrate's advisory lock, so
 * that several processes starting at once (cluster workers, containers) migrate exactly once. A
 * second process waits for the lock rather than failing: ECS starts many tasks at once, each
 * migrating first, and a failed start would count against the deployment's circuit breaker.
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
    advisoryLockMode: 'wait',
    log,
    logger: { debug() {}, info: log, warn: log, error: log },
  });
  return applied.map((m) => m.name);
}
