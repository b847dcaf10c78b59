import pg from 'pg';
import { DatabaseFailure } from '../errors.js';
import { classifyFailure } from './failure.js';

// Why the service cannot start on a database, as one line with its cause and its fix, told by
// what db/failure.js makes of the failure (never its message), and the check made once at start-up
// that finds it.

export const STATEMENT_POOLING =
  'the pooler in front of the database runs pool_mode = statement, ' +
  'which cannot hold a transaction: set pool_mode = transaction ' +
  'for this database (or point DATABASE_URL around the pooler)';

// Wrong credentials, database or pooler mode stop the start; a database not reachable yet (refused,
// a name not resolved) may be on its way, so the service says so and serves 503 until it answers.
/** @type {ReadonlySet<import('./db-types.js').Misconfiguration | undefined>} */
const MAY_COME = new Set(['refused', 'host']);

/**
 * Undefined when it is none of the misconfigurations a person must fix.
 * @param {unknown} err @param {{ variable: string, url: string }} where
 */
export function databaseProblem(err, { variable, url }) {
  const { hostname, port, username, pathname } = new URL(url);
  const at = `${hostname}:${port || 5432}`;
  const database = decodeURIComponent(pathname.slice(1)) || decodeURIComponent(username);
  const { code, statementPooling, misconfiguration } = classifyFailure(err);
  if (statementPooling) return STATEMENT_POOLING;
  switch (misconfiguration) {
    case 'password':
      return (
        `${variable}: PostgreSQL at ${at} refused the password of user ` +
        `"${decodeURIComponent(username)}" (28P01): put that user's password in ${variable}`
      );
    case 'database':
      return (
        `${variable}: database "${database}" does not exist at ${at} (3D000): ` +
        `create it (createdb ${database}) or name an existing one in ${variable}`
      );
    case 'refused':
      return (
        `${variable}: nothing accepts connections at ${at} (ECONNREFUSED): ` +
        `start PostgreSQL there, or point ${variable} at where it runs`
      );
    case 'host':
      return `${variable}: host "${hostname}" is not known (${code}): fix the host in ${variable}`;
    default:
      return undefined;
  }
}

/**
 * Opens a transaction on a connection of its own and rolls it back (a pooler in statement mode
 * refuses a query that leaves one open): a misconfiguration's one-liner (fatal: the start must
 * stop), or undefined; any other failure thrown.
 * @param {string} url @param {number} timeoutMs
 * @returns {Promise<{ line: string, fatal: boolean } | undefined>}
 */
export async function checkDatabase(url, timeoutMs) {
  const client = new pg.Client({
    connectionString: url,
    application_name: 'sluice',
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('BEGIN').catch((err) => {
      throw new DatabaseFailure(err, { atBegin: true });
    });
    await client.query('ROLLBACK');
    return undefined;
  } catch (err) {
    const line = databaseProblem(err, { variable: 'DATABASE_URL', url });
    const { error, misconfiguration } = classifyFailure(err);
    if (line) return { line, fatal: !MAY_COME.has(misconfiguration) };
    throw error;
  } finally {
    client.end().catch(() => {});
  }
}
