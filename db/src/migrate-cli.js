#!/usr/bin/env node
// `npm run migrate`: applies pending migrations to DIRECT_DATABASE_URL, else DATABASE_URL (or the
// database the PG* variables name).
import { environmentHelp } from '@sluice/env';
import { createCommand } from './command-line.js';
import { DATABASE_VARIABLES, MIGRATION_VARIABLES, migrationUrlFromEnv } from './database-url.js';

createCommand(
  'npm run migrate --',
  'Applies the pending migrations (db/migrations/) to DIRECT_DATABASE_URL when set, ' +
    'else to DATABASE_URL or the database the PG* variables name: all in one ' +
    'transaction, under a transaction-scoped advisory lock, so that several processes ' +
    'starting together migrate once, and a transaction pooler (PgBouncer, RDS Proxy) ' +
    'in between is safe. npm start migrates its embedded PostgreSQL itself.',
  environmentHelp({ ...MIGRATION_VARIABLES, ...DATABASE_VARIABLES }),
).parse();
const { migrate } = await import('./migrate.js');

let url;
try {
  url = migrationUrlFromEnv(process.env);
} catch (err) {
  console.error(`bad configuration: ${err instanceof Error ? err.message : err}`);
  process.exit(2);
}
if (!url) {
  console.error(
    'neither DIRECT_DATABASE_URL nor DATABASE_URL is set: say which ' +
      'database to migrate (npm start migrates its embedded one itself).',
  );
  process.exit(2);
}
try {
  const applied = await migrate(url);
  console.log(applied.length ? `applied: ${applied.join(', ')}` : 'schema is up to date');
} catch (err) {
  console.error(`migration failed: ${err instanceof Error ? err.message : err}`);
  process.exit(1);
}
