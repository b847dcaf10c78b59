#!/usr/bin/env node
// `npm run bench:db`: PostgreSQL's own cost per row, with no HTTP and no service (its usage says how).
// What it showed chose the schema of migration 0002 and the writer's all-new first try.
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { Option, createCommand, listOf, wholeNumber } from '@sluice/db/command-line';

/** @typedef {import('../service/src/users/user-schema.js').UserRow} UserRow */
/** @typedef {(client: import('pg').Client, rows: UserRow[]) => Promise<unknown>} Write */

// 0001's table, as it was, and the steps from it to 0002 one at a time.
const ID = 'id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY';
const REST = 'name text NOT NULL, phone text, password_hash text, created_at timestamptz NOT NULL DEFAULT now()';
const REGEX_CHECKS = `
  CHECK (char_length(email) <= 254 AND email = lower(email) AND email ~ '^[^@[:space:]]+@[^@[:space:]]+\\.[^@[:space:]]+$'),
  CHECK (char_length(name) BETWEEN 1 AND 200 AND name !~ '[[:cntrl:]]'),
  CHECK (phone ~ '^\\+[0-9]{6,15}$'),
  CHECK (char_length(password_hash) <= 255 AND password_hash ~ '^\\$[a-z0-9-]+\\$')`;

// STRATEGIES is imported below the command line; the writes run after that.
/** @type {Write} */
const skipping = (client, rows) => STRATEGIES.format.write(/** @type {any} */ (client), rows, 'skip');
/** @type {Write} */
const allNew = (client, rows) => STRATEGIES.format.write(/** @type {any} */ (client), rows, 'fail');

/** @type {Record<string, { schema: string | 'migrations', write: Write }>} */
const VARIANTS = {
  '0001 table, INSERT ... ON CONFLICT': { schema: `email text NOT NULL UNIQUE, ${ID}, ${REST}, ${REGEX_CHECKS}`, write: skipping },
  '+ email COLLATE "C"': { schema: `email text COLLATE "C" NOT NULL UNIQUE, ${ID}, ${REST}, ${REGEX_CHECKS}`, write: skipping },
  '+ email primary key, no id': { schema: `email text COLLATE "C" PRIMARY KEY, ${REST}, ${REGEX_CHECKS}`, write: skipping },
  '+ CHECKs without regex (0002 table)': { schema: 'migrations', write: skipping },
  '0002, all-new INSERT (format default)': { schema: 'migrations', write: allNew },
  '0002 without any CHECK, all-new INSERT': { schema: `email text COLLATE "C" PRIMARY KEY, ${REST}`, write: allNew },
  '0002, unnest all-new': { schema: 'migrations', write: (c, rows) => STRATEGIES.unnest.write(/** @type {any} */ (c), rows, 'fail') },
  '0002, COPY (copy)': { schema: 'migrations', write: (c, rows) => STRATEGIES.copy.write(/** @type {any} */ (c), rows, 'fail') },
  'naive: its table, parameterized INSERT': {
    schema: 'id serial PRIMARY KEY, email text UNIQUE, name text, phone text, password_hash text, created_at timestamptz DEFAULT now()',
    write: (client, rows) => client.query(`INSERT INTO users (email, name, phone, password_hash) VALUES ${rows.map((_, i) => `($${i * 4 + 1}, $${i * 4 + 2}, $${i * 4 + 3}, $${i * 4 + 4})`).join(', ')}`, rows.flat()),
  },
};
const ALL = Object.keys(VARIANTS);
const opts = createCommand('npm run bench:db --', `PostgreSQL's own cost per row: 1000-row statements over some connections for some seconds each, on a fresh production-like database (en-US ICU collation, fsync on). Each variant is a table shape and a statement shape; the variants run in turn, round after round, the order reversed every other round, and the median is quoted. The variants:
${ALL.map((name, i) => `  ${i}  ${name}`).join('\n')}`)
  .option('--rounds <n>', 'rounds of every variant', wholeNumber(1), 3)
  .option('--seconds <n>', 'how long each variant writes in a round', wholeNumber(1), 4)
  .option('--connections <n>', 'connections writing at once', wholeNumber(1), 4)
  .addOption(new Option('--only <numbers>', 'these variants only, by number, comma-separated').argParser(listOf(ALL.map((_, i) => String(i)))).default(ALL.map((_, i) => String(i)), 'all'))
  .parse()
  .opts();
const ROUNDS = /** @type {number} */ (opts.rounds);
const SECONDS = /** @type {number} */ (opts.seconds);
const CONNECTIONS = /** @type {number} */ (opts.connections);
const names = /** @type {string[]} */ (opts.only).map((i) => ALL[Number(i)]);

const { default: pg } = await import('pg');
const { migrate } = await import('@sluice/db/migrate');
const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
const { STRATEGIES } = await import('../service/src/users/user-repository.js');

/** @param {string} msg */
const say = (msg) => console.error(`[bench:db] ${msg}`);

const dataDir = await tempDataDir('sluice-bench-db-');
const server = await startLocalPostgres({ dataDir, persistent: false, durable: true, locale: 'icu-en-US' });
const RUN = Date.now().toString(36);

/** Emails shaped like the load tests': a long shared prefix, then the writer, the statement, the row. */
function makeRows(/** @type {string} */ prefix, /** @type {number} */ n) {
  /** @type {UserRow[]} */
  const rows = [];
  for (let i = 0; i < 1000; i++) rows.push([`k6-${RUN}${prefix}-${n}-${i}@load.test`, `Load ${n}.${i}`, '+15550100100', null]);
  return rows.sort((a, b) => (a[0] < b[0] ? -1 : 1));
}

/** @type {Record<string, number[]>} */
const results = {};
try {
  const admin = new pg.Client(server.url);
  await admin.connect();
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of round % 2 ? [...names].reverse() : names) {
      const { schema, write } = VARIANTS[name];
      await admin.query('DROP DATABASE IF EXISTS bench_db WITH (FORCE)');
      await admin.query('CREATE DATABASE bench_db');
      const url = server.url.replace(/\/postgres$/, '/bench_db');
      if (schema === 'migrations') await migrate(url);
      const clients = await Promise.all(Array.from({ length: CONNECTIONS }, async () => {
        const c = new pg.Client(url);
        await c.connect();
        return c;
      }));
      if (schema !== 'migrations') await clients[0].query(`CREATE TABLE users (${schema})`);
      await admin.query('CHECKPOINT');
      let written = 0;
      const deadline = Date.now() + SECONDS * 1000;
      const started = process.hrtime.bigint();
      await Promise.all(clients.map(async (client, c) => {
        for (let n = 0; Date.now() < deadline; n++) {
          await write(client, makeRows(`${round}-${c}`, n));
          written += 1000;
        }
      }));
      const rate = written / (Number(process.hrtime.bigint() - started) / 1e9);
      const { rows } = await clients[0].query('SELECT count(*)::int AS n FROM users');
      if (rows[0].n !== written) throw new Error(`${name}: ${rows[0].n} rows in the table, ${written} written`);
      await Promise.all(clients.map((c) => c.end()));
      (results[name] ??= []).push(rate);
      say(`round ${round + 1}/${ROUNDS} ${name}: ${Math.round(rate).toLocaleString('en-US')} rows/s`);
    }
  }
  await admin.end();
} finally {
  await server.stop();
  await rm(path.dirname(dataDir), { recursive: true, force: true });
}

const median = (/** @type {number[]} */ xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const first = median(results[names[0]]);
const lines = ['| variant | rows/s (median) | min – max | × first |', '| --- | --- | --- | --- |'];
for (const name of names) {
  const xs = results[name];
  lines.push(`| ${name} | ${Math.round(median(xs)).toLocaleString('en-US')} | ${Math.round(Math.min(...xs)).toLocaleString('en-US')} – ${Math.round(Math.max(...xs)).toLocaleString('en-US')} | ${(median(xs) / first).toFixed(2)} |`);
}
console.log(`\n${lines.join('\n')}\n\n${CONNECTIONS} connections, 1000-row statements, ${SECONDS} s × ${ROUNDS} rounds, en-US ICU database, fsync on.`);
