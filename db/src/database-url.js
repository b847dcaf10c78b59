/**
 * Where the service and the migrations find PostgreSQL: DATABASE_URL as given, or else one built
 * from libpq's PG* variables. The PG* form exists for ECS, which injects the user and the password
 * from the database's Secrets Manager secret as separate variables, so no URL holding the password
 * ever has to be written into a template.
 */
import { ConfigError } from './config-error.js';

// The modes pg understands; verify-full is the only one that also checks the server's name.
const SSL_MODES = ['disable', 'no-verify', 'require', 'verify-ca', 'verify-full'];

/**
 * @param {NodeJS.ProcessEnv} env
 * @returns {string | undefined} undefined when neither DATABASE_URL nor PGHOST is set
 */
export function databaseUrlFromEnv(env) {
  const given = env.DATABASE_URL?.trim();
  if (given) return given;
  const host = env.PGHOST?.trim();
  if (!host) return undefined;

  const required = (/** @type {string} */ name) => {
    const value = env[name];
    if (!value) throw new ConfigError(name, 'is required when PGHOST is set');
    return value;
  };
  const user = required('PGUSER');
  const password = required('PGPASSWORD');
  const database = env.PGDATABASE?.trim() || user;
  const port = env.PGPORT?.trim() || '5432';
  if (!/^\d{1,5}$/.test(port)) throw new ConfigError('PGPORT', `must be a port number, got ${JSON.stringify(port)}`);
  const sslMode = env.PGSSLMODE?.trim();
  if (sslMode && !SSL_MODES.includes(sslMode)) {
    throw new ConfigError('PGSSLMODE', `must be one of ${SSL_MODES.join(', ')}, got ${JSON.stringify(sslMode)}`);
  }

  // Every part percent-encoded: a generated password may hold @, :, / or %.
  const enc = encodeURIComponent;
  const url = `postgresql://${enc(user)}:${enc(password)}@${host}:${port}/${enc(database)}`;
  return sslMode ? `${url}?sslmode=${sslMode}` : url;
}
