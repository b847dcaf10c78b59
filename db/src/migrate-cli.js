#!/usr/bin/env node
// `npm run migrate`: applies pending migrations to DATABASE_URL.
import { migrate } from './migrate.js';

const url = process.env.DATABASE_URL;
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
