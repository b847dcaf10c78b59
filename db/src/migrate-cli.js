#!/usr/bin/env node
// `npm run migrate`: applies pending migrations to DATABASE_URL (or the database the PG* variables name).
import { databaseUrlFromEnv } from './database-url.js';
import { migrate } from './migrate.js';

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
