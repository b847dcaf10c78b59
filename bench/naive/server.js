#!/usr/bin/env node
// The naive baseline on PORT (0: any free port) and HOST, writing to DATABASE_URL. Prints one JSON
// line {"msg":"listening","port":n} like the service, so the bench starts both the same way.
import pg from 'pg';
import { createNaiveApp } from './app.js';

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL }); // pg's default: max 10
pool.on('error', (err) => console.error(`naive: idle client error: ${err.message}`));
const server = createNaiveApp(pool).listen(
  Number(process.env.PORT ?? 3000),
  process.env.HOST ?? '127.0.0.1',
  () => {
    const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
    console.log(JSON.stringify({ msg: 'listening', port }));
  },
);
process.on('SIGTERM', () => {
  server.close(() => pool.end().then(() => process.exit(0)));
  setInterval(() => server.closeIdleConnections(), 100).unref();
});
