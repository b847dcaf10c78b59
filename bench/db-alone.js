#!/usr/bin/env node
// `npm run bench:db`: PostgreSQL's own cost per row, with no HTTP and no service (its usage says how).
// What it showed chose the schema of migration 0002, the writer's all-new first try, the default
// statement's shape (one array literal per column) and merge mode's statement.
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { Option, createCommand, listOf, wholeNumber } from '@sluice/db/command-line';

/** @typedef {import('../service/src/users/user-schema.js').UserRow} UserRow */
/** @typedef {(client: import('pg').Client, rows: UserRow[]) => Promise<unknown>} Write */
/**
 * A variant: a table shape, a statement shape, and what its rows are: new (default), already
 * stored and sent again unchanged (replay), or stored and sent with every name changed (changed).
 * ordered: every row carries changedAt (merge mode's ordering value); a changed row a newer one.
 * @typedef {{ schema: string | 'migrations', write: Write, rows?: 'new' | 'replay' | 'changed', ordered?: boolean }} Variant
 */

// 0001's table, as it was, and the steps from it to 0002 one at a time.
const ID = 'id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY';
const REST =
  'name text NOT NULL, phone text, password_hash text, created_at timestamptz NOT NULL DEFAULT now()';
const REGEX_CHECKS = `
  CHECK (char_length(email) <= 254 AND email = lower(email) AND email ~ '^[^@[:space:]]+@[^@[:space:]]+\\.[^@[:space:]]+$'),
  CHECK (char_length(name) BETWEEN 1 AND 200 AND name !~ '[[:cntrl:]]'),
  CHECK (phone ~ '^\\+[0-9]{6,15}$'),
  CHECK (char_length(password_hash) <= 255 AND password_hash ~ '^\\$[a-z0-9-]+\\$')`;

// The service's statements are imported below the command line; the writes run after that.
/** As the service writes a chunk, asserting that it brings back no erased email. */
const chunkWrite = (/** @type {'fail' | 'skip' | 'merge'} */ onConflict) => ({
  onConflict,
  assertion: ERASURES.assertion,
});
/** @param {'fail' | 'skip' | 'merge'} onConflict @returns {Write} */
const sluice = (onConflict) => (client, rows) =>
  STRATEGIES.format.write(/** @type {any} */ (client), rows, chunkWrite(onConflict));
/** @param {(rows: UserRow[]) => string} source @returns {Write} */
const shaped = (source) => (client, rows) =>
  client.query(SQL.writeStatement(source(rows), 'fail', 'none'));

/** @param {string} columns @returns {Write} */
const returning = (columns) => (client, rows) =>
  client.query({
    text: `${SQL.writeStatement(SQL.rowsAsArrays(rows), 'fail', 'none')} RETURNING ${columns}`,
    ...SQL.RETURNED_AS_TEXT,
  });

/** @type {Record<string, Variant>} */
const VARIANTS = {
  '0001 table, INSERT ... ON CONFLICT': {
    schema: `email text NOT NULL UNIQUE, ${ID}, ${REST}, ${REGEX_CHECKS}`,
    write: sluice('skip'),
  },
  '+ email COLLATE "C"': {
    schema: `email text COLLATE "C" NOT NULL UNIQUE, ${ID}, ${REST}, ${REGEX_CHECKS}`,
    write: sluice('skip'),
  },
  '+ email primary key, no id': {
    schema: `email text COLLATE "C" PRIMARY KEY, ${REST}, ${REGEX_CHECKS}`,
    write: sluice('skip'),
  },
  '+ CHECKs without regex (0002 table)': { schema: 'migrations', write: sluice('skip') },
  'all-new INSERT, VALUES list (the format shape until 0.2)': {
    schema: 'migrations',
    write: shaped((rows) => SQL.rowsAsValues(rows)),
  },
  'all-new INSERT, unnest of ARRAY[...] constructors': {
    schema: 'migrations',
    write: shaped((rows) => arrayConstructors(rows)),
  },
  'all-new INSERT, unnest of array literals (format, the default)': {
    schema: 'migrations',
    write: sluice('fail'),
  },
  'all-new INSERT, unnest of array parameters (unnest)': {
    schema: 'migrations',
    write: (c, rows) => STRATEGIES.unnest.write(/** @type {any} */ (c), rows, chunkWrite('fail')),
  },
  'all-new, COPY (copy)': {
    schema: 'migrations',
    write: (c, rows) => STRATEGIES.copy.write(/** @type {any} */ (c), rows, chunkWrite('fail')),
  },
  // return=representation: what RETURNING the written rows costs, by what it returns.
  'all-new INSERT, RETURNING email, name, phone and both timestamps through to_json (the representation before)':
    {
      schema: 'migrations',
      write: returning(
        `email, name, phone, to_json(created_at) #>> '{}', to_json(updated_at) #>> '{}'`,
      ),
    },
  'all-new INSERT, RETURNING email and created_at': {
    schema: 'migrations',
    write: returning('email, created_at'),
  },
  'all-new INSERT after now(), RETURNING nothing (the representation, all new: every row written)':
    {
      schema: 'migrations',
      write: (client, rows) =>
        client.query({
          text: SQL.writeStatement(SQL.rowsAsArrays(rows), 'fail', 'rows'),
          ...SQL.RETURNED_AS_TEXT,
        }),
    },
  'all-new INSERT ... ON CONFLICT DO NOTHING after now(), RETURNING email (the representation, after a stored email)':
    {
      schema: 'migrations',
      write: (client, rows) =>
        client.query({
          text: SQL.writeStatement(SQL.rowsAsArrays(rows), 'skip', 'rows'),
          ...SQL.RETURNED_AS_TEXT,
        }),
    },
  'all-new INSERT, no CHECK at all': {
    schema: `email text COLLATE "C" PRIMARY KEY, ${REST}, updated_at timestamptz`,
    write: sluice('fail'),
  },
  'all-new, merge clause from the start (DO UPDATE)': {
    schema: 'migrations',
    write: sluice('merge'),
  },
  'replay, ignore (DO NOTHING)': { schema: 'migrations', write: sluice('skip'), rows: 'replay' },
  'replay unchanged, merge (sluice: unchanged rows filtered out, then DO UPDATE ... WHERE IS DISTINCT)':
    { schema: 'migrations', write: sluice('merge'), rows: 'replay' },
  'replay unchanged, merge without the filter (DO UPDATE ... WHERE IS DISTINCT alone)': {
    schema: 'migrations',
    write: mergeUnfiltered,
    rows: 'replay',
  },
  'replay unchanged, merge without the WHERE either (every row rewritten)': {
    schema: 'migrations',
    write: mergeEveryRow,
    rows: 'replay',
  },
  'replay with every name changed, merge (sluice)': {
    schema: 'migrations',
    write: sluice('merge'),
    rows: 'changed',
  },
  'replay with every name changed, merge without the filter': {
    schema: 'migrations',
    write: mergeUnfiltered,
    rows: 'changed',
  },
  'naive: its table, parameterized INSERT': {
    schema:
      'id serial PRIMARY KEY, email text UNIQUE, name text, phone text, password_hash text, created_at timestamptz DEFAULT now()',
    write: (client, rows) =>
      client.query(
        `INSERT INTO users (email, name, phone, password_hash) VALUES ${rows.map((_, i) => `($${i * 4 + 1}, $${i * 4 + 2}, $${i * 4 + 3}, $${i * 4 + 4})`).join(', ')}`,
        rows.flatMap((r) => [r.email, r.name, r.phone, r.passwordHash]),
      ),
  },
  // Merge mode with changedAt on every row: the ordering value's cost beside the three above.
  'all-new, merge clause from the start, with changedAt': {
    schema: 'migrations',
    write: sluice('merge'),
    ordered: true,
  },
  'replay unchanged with changedAt, merge (stale: filtered out by the same probe)': {
    schema: 'migrations',
    write: sluice('merge'),
    rows: 'replay',
    ordered: true,
  },
  'replay with every name changed and a newer changedAt, merge': {
    schema: 'migrations',
    write: sluice('merge'),
    rows: 'changed',
    ordered: true,
  },
  // What merge mode's all-new attempt (a plain INSERT) sends when every row carries changedAt,
  // beside the default statement (6): the ordering value's cost on the path most merges take.
  'all-new INSERT, unnest of array literals (format, the default), with changedAt': {
    schema: 'migrations',
    write: sluice('fail'),
    ordered: true,
  },
};
const ALL = Object.keys(VARIANTS);
const opts = createCommand(
  'npm run bench:db --',
  `PostgreSQL's own cost per row: 1000-row statements over some connections for some seconds each, on a fresh production-like database (en-US ICU collation, fsync on), with its CPU time read from /proc (the postmaster and every backend): microseconds of PostgreSQL CPU per row, and rows/s. Each variant is a table shape, a statement shape and its rows (new; or stored first, untimed, then sent again unchanged or changed); the variants run in turn, round after round, the order reversed every other round, and the median is quoted. The variants:
${ALL.map((name, i) => `  ${i}  ${name}`).join('\n')}`,
)
  .option('--rounds <n>', 'rounds of every variant', wholeNumber(1), 3)
  .option('--seconds <n>', 'how long each variant writes in a round', wholeNumber(1), 4)
  .option('--connections <n>', 'connections writing at once', wholeNumber(1), 4)
  .addOption(
    new Option('--only <numbers>', 'these variants only, by number, comma-separated')
      .argParser(listOf(ALL.map((_, i) => String(i))))
      .default(
        ALL.map((_, i) => String(i)),
        'all',
      ),
  )
  .parse()
  .opts();
const ROUNDS = /** @type {number} */ (opts.rounds);
const SECONDS = /** @type {number} */ (opts.seconds);
const CONNECTIONS = /** @type {number} */ (opts.connections);
const names = /** @type {string[]} */ (opts.only).map((i) => ALL[Number(i)]);

const { default: pg } = await import('pg');
const { default: format } = await import('pg-format');
const { migrate } = await import('@sluice/db/migrate');
const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
const { STRATEGIES } = await import('../service/src/users/chunk-writers.js');
const SQL = await import('../service/src/users/user-sql.js');
const ERASURES = (await import('../service/src/users/erasure-guard.js')).createErasureGuard();
const { userRow } = await import('../test/support/user-rows.js');
const { postgresCpuSeconds, postmasterPid } = await import('./lib/process-stats.js');
const { median, range } = await import('./lib/stats.js');

/** The arrays as ARRAY[...] constructors of one literal a value (pg-format's %L on a list). @param {UserRow[]} rows */
function arrayConstructors(rows) {
  const column = (/** @type {'email' | 'name' | 'phone' | 'passwordHash'} */ field) =>
    format(
      'ARRAY[%L]::text[]',
      rows.map((r) => r[field]),
    );
  return `SELECT * FROM unnest(${column('email')}, ${column('name')}, ${column('phone')}, ${column('passwordHash')})`;
}

/** Merge without the IS DISTINCT FROM guard: what a plain upsert costs on a replay. @type {Write} */
function mergeEveryRow(client, rows) {
  return client.query(
    `INSERT INTO users (${SQL.COLUMNS}) ${SQL.rowsAsArrays(rows)} ${SQL.MERGE.replace(/\s+WHERE[\s\S]*$/, '')}`,
  );
}

/** Merge with the conflict clause alone: every stored row is met by a speculative insertion and locked. @type {Write} */
function mergeUnfiltered(client, rows) {
  return client.query(`INSERT INTO users (${SQL.COLUMNS}) ${SQL.rowsAsArrays(rows)} ${SQL.MERGE}`);
}

/** @param {string} msg */
const say = (msg) => console.error(`[bench:db] ${msg}`);

const dataDir = await tempDataDir('sluice-bench-db-');
const server = await startLocalPostgres({
  dataDir,
  persistent: false,
  durable: true,
  locale: 'icu-en-US',
});
const pgPid = await postmasterPid(server.dataDir);
const RUN = Date.now().toString(36);
// Stored before a replay variant's timed part: enough 1000-row statements per connection that the
// timed part cycles through them rather than resending one.
const REPLAY_STATEMENTS = 40;

/**
 * Emails shaped like the load tests': a long shared prefix, then the writer, the statement, the row.
 * @param {string} prefix @param {number} n @param {string} [name]  how the names begin
 * @param {string | null} [changedAt]  every row's ordering value (none by default)
 */
function makeRows(prefix, n, name = 'Load', changedAt = null) {
  /** @type {UserRow[]} */
  const rows = [];
  for (let i = 0; i < 1000; i++)
    rows.push(
      userRow({
        email: `k6-${RUN}${prefix}-${n}-${i}@load.test`,
        name: `${name} ${n}.${i}`,
        phone: '+15550100100',
        changedAt,
      }),
    );
  return rows.sort((a, b) => (a.email < b.email ? -1 : 1));
}

/** @type {Record<string, { rate: number, usPerRow: number }[]>} */
const results = {};
try {
  const admin = new pg.Client(server.url);
  await admin.connect();
  for (let round = 0; round < ROUNDS; round++) {
    for (const name of round % 2 ? [...names].reverse() : names) {
      const { schema, write, rows: kind = 'new', ordered = false } = VARIANTS[name];
      /** The ordering value of a cycle's rows (a changed replay: one cycle later, newer). @param {number} cycle */
      const at = (cycle) =>
        ordered
          ? new Date(Date.UTC(2026, 0, 1) + cycle * 1000).toISOString().replace('Z', '123Z')
          : null;
      await admin.query('DROP DATABASE IF EXISTS bench_db WITH (FORCE)');
      await admin.query('CREATE DATABASE bench_db');
      const url = server.url.replace(/\/postgres$/, '/bench_db');
      if (schema === 'migrations') await migrate(url);
      const clients = await Promise.all(
        Array.from({ length: CONNECTIONS }, async () => {
          const c = new pg.Client(url);
          await c.connect();
          return c;
        }),
      );
      if (schema !== 'migrations') await clients[0].query(`CREATE TABLE users (${schema})`);
      if (kind !== 'new') {
        await Promise.all(
          clients.map(async (client, c) => {
            for (let n = 0; n < REPLAY_STATEMENTS; n++)
              await STRATEGIES.format.write(
                /** @type {any} */ (client),
                makeRows(`${round}-${c}`, n, 'Load', at(0)),
                chunkWrite('fail'),
              );
          }),
        );
      }
      const stored = kind === 'new' ? 0 : CONNECTIONS * REPLAY_STATEMENTS * 1000;
      await admin.query('CHECKPOINT');
      let written = 0;
      const deadline = Date.now() + SECONDS * 1000;
      const cpu0 = await postgresCpuSeconds(pgPid);
      const started = process.hrtime.bigint();
      await Promise.all(
        clients.map(async (client, c) => {
          for (let n = 0; Date.now() < deadline; n++) {
            // A replay cycles through the stored statements; a changed one renames them each cycle.
            const cycle = Math.floor(n / REPLAY_STATEMENTS);
            const rows =
              kind === 'new'
                ? makeRows(`${round}-${c}`, n, 'Load', at(0))
                : makeRows(
                    `${round}-${c}`,
                    n % REPLAY_STATEMENTS,
                    kind === 'changed' ? `Changed ${cycle}` : 'Load',
                    kind === 'changed' ? at(cycle + 1) : at(0),
                  );
            await write(client, rows);
            written += 1000;
          }
        }),
      );
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const cpu = (await postgresCpuSeconds(pgPid)) - cpu0;
      const { rows } = await clients[0].query('SELECT count(*)::int AS n FROM users');
      const expected = kind === 'new' ? written : stored;
      if (rows[0].n !== expected)
        throw new Error(`${name}: ${rows[0].n} rows in the table, ${expected} expected`);
      await Promise.all(clients.map((c) => c.end()));
      const result = { rate: written / seconds, usPerRow: (cpu * 1e6) / written };
      (results[name] ??= []).push(result);
      say(
        `round ${round + 1}/${ROUNDS} ${name}: ${Math.round(result.rate).toLocaleString('en-US')} rows/s, ${result.usPerRow.toFixed(2)} µs of PostgreSQL CPU a row`,
      );
    }
  }
  await admin.end();
} finally {
  await server.stop();
  await rm(path.dirname(dataDir), { recursive: true, force: true });
}

const first = median(results[names[0]].map((r) => r.usPerRow));
const lines = [
  '| # | variant | PostgreSQL CPU µs a row (median) | min – max | × first | rows/s (median) |',
  '| --- | --- | --- | --- | --- | --- |',
];
for (const name of names) {
  const us = results[name].map((r) => r.usPerRow);
  const { min, max } = range(us);
  lines.push(
    `| ${ALL.indexOf(name)} | ${name} | ${median(us).toFixed(2)} | ${min.toFixed(2)} – ${max.toFixed(2)} | ${(median(us) / first).toFixed(2)} | ${Math.round(median(results[name].map((r) => r.rate))).toLocaleString('en-US')} |`,
  );
}
console.log(
  `\n${lines.join('\n')}\n\n${CONNECTIONS} connections, 1000-row statements, ${SECONDS} s × ${ROUNDS} rounds, en-US ICU database, fsync on; CPU of every PostgreSQL process while the variant wrote.`,
);
