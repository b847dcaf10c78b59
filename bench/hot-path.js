#!/usr/bin/env node
// `npm run bench:hot-path`: what POST /users spends in this process next to its database round trip.
import { performance } from 'node:perf_hooks';
import { createCommand } from '@sluice/db/command-line';

createCommand(
  'npm run bench:hot-path --',
  'What POST /users spends in this process for one 1000-user batch (reading the JSON body, validation, SQL building), medians of 300 runs, next to the database round trip of the same batch (100 inserts).',
  {
    DATABASE_URL: 'the database of the round trip (default: a throwaway embedded PostgreSQL)',
  },
).parse();

const { default: pg } = await import('pg');
const { migrate } = await import('@sluice/db/migrate');
const { makeUsers } = await import('../test/support/users.js');
const { parseJsonBody } = await import('../service/src/http/json-body.js');
const { rowsAsArrays, writeStatement } = await import('../service/src/users/user-sql.js');
const { parseUserBatch } = await import('../service/src/users/user-schema.js');
const { median } = await import('./lib/stats.js');

/** The default strategy's statement for an all-new chunk. @param {import('../service/src/users/user-schema.js').UserRow[]} rows */
const buildInsertSql = (rows) => writeStatement(rowsAsArrays(rows), 'fail', 'none');

const BATCH = 1000;
const ROUNDS = 300;

/** Median milliseconds of fn over ROUNDS runs, after a warm-up. @param {(i: number) => unknown} fn */
async function medianMs(fn, rounds = ROUNDS) {
  for (let i = 0; i < 30; i++) await fn(-1 - i);
  const times = [];
  for (let i = 0; i < rounds; i++) {
    const t = performance.now();
    await fn(i);
    times.push(performance.now() - t);
  }
  return median(times);
}

const body = JSON.stringify(makeUsers(BATCH, 'hot'));
const parsed = JSON.parse(body);
const rows = parseUserBatch(parsed);
const bodyBytes = Buffer.from(body);
const results = {
  jsonParseMs: await medianMs(() => JSON.parse(body)),
  // What the service does with the bytes: UTF-8 check, decode, JSON.parse, duplicate-key count.
  readBodyMs: await medianMs(() => parseJsonBody(bodyBytes)),
  validateMs: await medianMs(() => parseUserBatch(parsed)),
  buildSqlMs: await medianMs(() => buildInsertSql(rows)),
};

let local;
let url = process.env.DATABASE_URL;
if (!url) {
  const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
  local = await startLocalPostgres({ dataDir: await tempDataDir(), persistent: false });
  url = local.url;
}
await migrate(url);
const client = new pg.Client(url);
await client.connect();
const rounds = 100;
results.databaseInsertMs = await medianMs(async (i) => {
  const fresh = parseUserBatch(makeUsers(BATCH, `hot-${i}-${Date.now()}`));
  await client.query(buildInsertSql(fresh));
}, rounds);
await client.end();
await local?.stop();

const inProcess = results.readBodyMs + results.validateMs + results.buildSqlMs;
console.log(`bytes per 1000-user body: ${body.length}`);
for (const [k, v] of Object.entries(results))
  console.log(`${k.padEnd(18)} ${v.toFixed(3)} ms (median)`);
console.log(
  `in-process total    ${inProcess.toFixed(3)} ms = ${((inProcess / results.databaseInsertMs) * 100).toFixed(1)}% of the insert round trip`,
);
