#!/usr/bin/env node
// `npm run migrate`: applies pending migrations to DATABASE_URL (or the database the PG* variables name).
import { environmentHelp } from '@sluice/env';
import { createCommand } from './command-line.js';
import { DATABASE_VARIABLES, databaseUrlFromEnv } from './database-url.js';

createCommand('npm run migrate --', 'Applies the pending migrations (db/migrations/) to DATABASE_URL, or to the database the PG* variables name, once, under an advisory lock: several processes starting together migrate once. npm start migrates its embedded PostgreSQL itself.', environmentHelp(DATABASE_VARIABLES)).parse();
const { migrate } = await import('./migrate.js');

let url;
try {
  url = databaseUrlFromEnv(process.env);
} catch (err) {
  console.error(`bad configuration: ${err instanceof Error ? err.message : err}`);
  process.exit(2);
}
if (!url) {
  console.error('DATABASE_URL is not set: say which database to migrate (npm start migrates its embedded one itself).');
  process.exit(2);
}
try {
  const applied = await migrate(url);
  console.log(applied.length ? `applied: ${applied.join(', ')}` : 'schema is up to date');
} catch (err) {
  console.error(`migration failed: ${err instanceof Error ? err.message : err}`);
  process.exit(1);
}
