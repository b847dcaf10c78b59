import { fileURLToPath } from 'node:url';
import { PG_MIGRATE_LOCK_ID, runner } from 'node-pg-migrate';
import pg from 'pg';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations', import.meta.url));
export const MIGRATIONS_TABLE = 'pgmigrations';

// node-pg-migrate's own transaction control, which migrate() does instead (see there).
const RUNNERS_OWN = new Set(['BEGIN', 'COMMIT', 'ROLLBACK']);
// What node-pg-migrate sends around a migration that says it cannot run in a transaction.
const OUTSIDE_TRANSACTION = new Set(['BEGIN;', 'COMMIT;']);

/**
 * Applies every pending migration in one transaction, under a transaction-scoped advisory lock,
 * so that several processes starting at once (cluster workers, containers) migrate exactly once. A
 * second process waits for the lock rather than failing: ECS starts many tasks at once, each
 * migrating first, and a failed start would count against the deployment's circuit breaker.
 *
 * Everything, the lock included, is one transaction, so it holds behind a transaction pooler too
 * (PgBouncer in transaction mode, RDS Proxy): node-pg-migrate's own lock is a session lock
 * (pg_advisory_lock), which a pooler would leave on whichever server connection took it, and its
 * check of what was applied would run in transactions of their own. So migrate() opens the
 * transaction and takes the lock (pg_advisory_xact_lock, on node-pg-migrate's lock id, so it still
 * excludes a run that takes node-pg-migrate's session lock), hands node-pg-migrate the connection
 * without its own BEGIN/COMMIT and without its lock, and commits: the lock goes with the commit.
 * A migration that cannot run in a transaction (CREATE INDEX CONCURRENTLY) is refused.
 *
 * @param {string} databaseUrl  a direct URL where one is set (DIRECT_DATABASE_URL: migrationUrlFromEnv)
 * @param {{ log?: (msg: string) => void, dir?: string }} [options]  dir: the migrations' folder (tests)
 * @returns {Promise<string[]>} the names of the migrations applied now
 */
export async function migrate(databaseUrl, { log = () => {}, dir = MIGRATIONS_DIR } = {}) {
  const client = new pg.Client({ connectionString: databaseUrl, application_name: 'sluice-migrate' });
  // A connection lost mid-run fails the query in flight; without a listener it would crash the process.
  client.on('error', () => {});
  await client.connect();
  try {
    await client.query(`BEGIN; SELECT pg_advisory_xact_lock(${PG_MIGRATE_LOCK_ID})`);
    try {
      const applied = await runner({
        dbClient: /** @type {pg.ClientBase} */ (/** @type {unknown} */ ({ query: inOneTransaction(client) })),
        dir,
        direction: 'up',
        migrationsTable: MIGRATIONS_TABLE,
        singleTransaction: true,
        checkOrder: true,
        noLock: true,
        log,
        logger: { debug() {}, info: log, warn: log, error: log },
      });
      await client.query('COMMIT');
      return applied.map((m) => m.name);
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {});
      throw err;
    }
  } finally {
    await client.end().catch(() => {});
  }
}

/**
 * The client's query, with node-pg-migrate's BEGIN, COMMIT and ROLLBACK left out: migrate() holds
 * the transaction. A migration that would step outside it is refused.
 * @param {pg.Client} client
 * @returns {(query: string | pg.QueryConfig, values?: unknown[]) => Promise<pg.QueryResult>}
 */
function inOneTransaction(client) {
  return async (query, values) => {
    const text = typeof query === 'string' ? query.trim() : query.text;
    if (RUNNERS_OWN.has(text)) return /** @type {pg.QueryResult} */ ({ command: text, rowCount: 0, rows: [], fields: [], oid: 0 });
    if (OUTSIDE_TRANSACTION.has(text)) {
      throw new Error('a migration asks to run outside a transaction: sluice applies every pending migration in one transaction, under a transaction-scoped lock; apply that one by hand (psql on a direct connection)');
    }
    return client.query(query, values);
  };
}
