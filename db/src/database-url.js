// DATABASE_URL, or else one built from libpq's PG* variables: ECS injects the user and the password
// from the database's secret as separate variables, so no URL holding the password is written.
import { defineVariables, frozenWords, integer, loadEnv, oneOf, text, url } from '@sluice/env';

// The modes pg understands; verify-full is the only one that also checks the server's name.
const SSL_MODES = frozenWords(['disable', 'no-verify', 'require', 'verify-ca', 'verify-full']);
const WITH_PGHOST = 'required when PGHOST is set and DATABASE_URL unset';

export const DATABASE_VARIABLES = defineVariables({
  DATABASE_URL: {
    parser: url({ protocols: ['postgres', 'postgresql'] }),
    description:
      'PostgreSQL to write to; unset: the PG* variables ' +
      'below, or (npm start) the embedded PostgreSQL',
  },
  PGHOST: {
    parser: text(),
    description:
      'used when DATABASE_URL is unset (how ECS injects the RDS secret): ' +
      'the URL is built from the PG* variables, each part percent-encoded',
  },
  PGPORT: {
    parser: integer({ min: 1, max: 65535 }),
    default: 5432,
    description: "PostgreSQL's port, with PGHOST",
  },
  PGUSER: { parser: text(), defaultText: WITH_PGHOST, description: 'the user, with PGHOST' },
  PGPASSWORD: {
    parser: text({ trim: false }),
    defaultText: WITH_PGHOST,
    description: 'the password, with PGHOST',
  },
  PGDATABASE: {
    parser: text(),
    defaultText: 'the value of PGUSER',
    description: 'the database, with PGHOST',
  },
  PGSSLMODE: {
    parser: oneOf(SSL_MODES),
    description: "TLS, with PGHOST: verify-full checks the server's certificate and name",
  },
});

/** @typedef {import('@sluice/env/load-env').Values<typeof DATABASE_VARIABLES>} DatabaseValues */

/** With PGHOST (and no DATABASE_URL), a user and a password. @param {DatabaseValues} v */
export function databaseRules(v) {
  if (v.DATABASE_URL || !v.PGHOST) return [];
  return frozenWords(['PGUSER', 'PGPASSWORD'])
    .filter((name) => !v[name])
    .map((name) => ({ variable: name, problem: 'is required when PGHOST is set' }));
}

/** Checked by databaseRules. @param {DatabaseValues} v @returns {string | undefined} */
export function databaseUrlFrom(v) {
  if (v.DATABASE_URL) return v.DATABASE_URL;
  if (!v.PGHOST) return undefined;
  const user = /** @type {string} */ (v.PGUSER);
  // Every part percent-encoded: a generated password may hold @, :, / or %.
  const enc = encodeURIComponent;
  const login = `${enc(user)}:${enc(/** @type {string} */ (v.PGPASSWORD))}`;
  const built = `postgresql://${login}@${v.PGHOST}:${v.PGPORT}/${enc(v.PGDATABASE ?? user)}`;
  return v.PGSSLMODE ? `${built}?sslmode=${v.PGSSLMODE}` : built;
}

/** @param {NodeJS.ProcessEnv} env @returns {string | undefined} */
export function databaseUrlFromEnv(env) {
  return databaseUrlFrom(loadEnv(DATABASE_VARIABLES, env, databaseRules));
}

/**
 * A direct connection beside a pooled DATABASE_URL (Prisma's `directUrl`). Migrations are safe
 * through a transaction pooler too, but a pooler may end a long migration, RDS Proxy pins its
 * connection, and the pooled role may not own the schema.
 */
export const MIGRATION_VARIABLES = defineVariables({
  DIRECT_DATABASE_URL: {
    parser: url({ protocols: ['postgres', 'postgresql'] }),
    defaultText: 'DATABASE_URL (or the PG* variables)',
    description:
      'PostgreSQL for the migrations (npm run migrate, npm start), ' +
      "straight to the server when DATABASE_URL is a pooler's",
  },
});

/** @param {NodeJS.ProcessEnv} env @returns {string | undefined} */
export function migrationUrlFromEnv(env) {
  return loadEnv(MIGRATION_VARIABLES, env).DIRECT_DATABASE_URL ?? databaseUrlFromEnv(env);
}
