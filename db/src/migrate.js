import { fileURLToPath } from 'node:url';
import { PG_MIGRATE_LOCK_ID, runner } from 'node-pg-migrate';
import pg from 'pg';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../migrations', import.meta.url));
export const MIGRATIONS_TABLE = 'pgmigrations';

// node-pg-migrate's own transaction control, which migrate() does instead; and what it sends
// around a migration that cannot run in a transaction.
const RUNNERS_OWN = new Set(['BEGIN', 'COMMIT', 'ROLLBACK']);
const OUTSIDE_TRANSACTION = new Set(['BEGIN;', 'COMMIT;']);

/**
 * Applies every pending migration, in order, in one transaction under pg_advisory_xact_lock on
 * node-pg-migrate's lock id: concurrent starters wait, then find nothing pending; it holds behind a
 * transaction pooler, where a session lock would not. CREATE INDEX CONCURRENTLY and the like are
 * refused.
 * @param {string} databaseUrl @param {{ log?: (msg: string) => void, dir?: string }} [options]
 * @returns {Promise<string[]>} the names of the migrations applied now
 */
export async function migrate(databaseUrl, { log = () => {}, dir = MIGRATIONS_DIR } = {}) {
  const client = new pg.Client({
    connectionString: databaseUrl,
    application_name: 'sluice-migrate',
  });
  // a lost connection fails the query in flight instead of the process
  client.on('error', () => {});
  await client.connect();
  try {
    await client.query(`BEGIN; SELECT pg_advisory_xact_lock(${PG_MIGRATE_LOCK_ID})`);
    try {
      const applied = await runner({
        dbClient: /** @type {pg.ClientBase} */ (
          /** @type {unknown} */ ({ query: inOneTransaction(client) })
        ),
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
 * The client's query without node-pg-migrate's BEGIN, COMMIT and ROLLBACK; refusing a step outside.
 * @param {pg.Client} client
 * @returns {(query: string | pg.QueryConfig, values?: unknown[]) => Promise<pg.QueryResult>}
 */
function inOneTransaction(client) {
  return async (query, values) => {
    const text = typeof query === 'string' ? query.trim() : query.text;
    if (RUNNERS_OWN.has(text))
      return /** @type {pg.QueryResult} */ ({
        command: text,
        rowCount: 0,
        rows: [],
        fields: [],
        oid: 0,
      });
    if (OUTSIDE_TRANSACTION.has(text)) {
      throw new Error(
        'a migration asks to run outside a transaction: sluice applies every ' +
          'pending migration in one transaction, under a transaction-scoped ' +
          'lock; apply that one by hand (psql on a direct connection)',
      );
    }
    return client.query(query, values);
  };
}
