import pg from 'pg';
import { isStatementPooling, refusedToBegin } from './lending.js';
import { errorCode } from '../error-code.js';

// Why the service cannot start on a database, as one line with its cause and its fix, told by
// SQLSTATE or errno (never a message), and the check made once at start-up that finds it.

export const STATEMENT_POOLING =
  'the pooler in front of the database runs pool_mode = statement, ' +
  'which cannot hold a transaction: set pool_mode = transaction ' +
  'for this database (or point DATABASE_URL around the pooler)';

// Wrong credentials, database or pooler mode stop the start; a database not reachable yet (refused,
// a name not resolved) may be on its way, so the service says so and serves 503 until it answers.
const MAY_COME = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN']);

/**
 * Undefined when it is none of the misconfigurations a person must fix.
 * @param {unknown} err @param {{ variable: string, url: string }} where
 */
export function databaseProblem(err, { variable, url }) {
  const { hostname, port, username, pathname } = new URL(url);
  const at = `${hostname}:${port || 5432}`;
  const database = decodeURIComponent(pathname.slice(1)) || decodeURIComponent(username);
  const code = errorCode(err);
  if (isStatementPooling(err)) return STATEMENT_POOLING;
  switch (code) {
    case '28P01':
      return (
        `${variable}: PostgreSQL at ${at} refused the password of user ` +
        `"${decodeURIComponent(username)}" (28P01): put that user's password in ${variable}`
      );
    case '3D000':
      return (
        `${variable}: database "${database}" does not exist at ${at} (3D000): ` +
        `create it (createdb ${database}) or name an existing one in ${variable}`
      );
    case 'ECONNREFUSED':
      return (
        `${variable}: nothing accepts connections at ${at} (ECONNREFUSED): ` +
        `start PostgreSQL there, or point ${variable} at where it runs`
      );
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `${variable}: host "${hostname}" is not known (${code}): fix the host in ${variable}`;
    default:
      return undefined;
  }
}

/**
 * Opens a transaction on a connection of its own and rolls it back (two round trips: a pooler in
 * statement mode refuses a query that leaves a transaction open). Resolves with the one-liner of a
 * misconfiguration (fatal: the start must stop), undefined when the database can hold a
 * transaction; throws any other failure.
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
      throw refusedToBegin(err);
    });
    await client.query('ROLLBACK');
    return undefined;
  } catch (err) {
    const line = databaseProblem(err, { variable: 'DATABASE_URL', url });
    if (line) return { line, fatal: !MAY_COME.has(errorCode(err) ?? '') };
    throw err;
  } finally {
    client.end().catch(() => {});
  }
}
