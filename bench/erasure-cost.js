#!/usr/bin/env node
// `npm run bench:erasure`: what erasure costs, side by side in one run on two throwaway embedded
// PostgreSQLs (production-like: ICU, fsync on), one service each: the service + PostgreSQL CPU a
// user of 1000-user batches 8 at a time and 1-user requests 100 at a time, with no tombstone and
// with TOMBSTONES of them (alternated, several rounds); then 10,000 stored users erased in one
// POST /erasures beside those tombstones, timed.
import { createCommand } from '@sluice/db/command-line';

const program = createCommand(
  'npm run bench:erasure --',
  'CPU a user with no tombstone and with many, side by side; the time of a 10,000-email erasure.',
  {},
)
  .option('--rounds <n>', 'rounds of each load and database, alternated', '3')
  .option('--seconds <n>', 'about how long each run lasts', '8')
  .option('--tombstones <n>', 'tombstones in the second database', '1000000')
  .option('--erase <n>', 'users erased in one request', '10000')
  .option('--only <load>', '1000x8 or 1x100 alone')
  .parse();
const opts = program.opts();

const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
const { migrate } = await import('@sluice/db/migrate');
const { startServerProcess } = await import('../test/support/server-process.js');
const { postgresCpuSeconds, postmasterPid, processCpuSeconds } =
  await import('./lib/process-stats.js');
const { median } = await import('./lib/stats.js');
const { default: pg } = await import('pg');

const KEY = 'a benchmark erasure key of forty characters';
const LOADS = [
  { name: '1000x8', users: 1000, concurrency: 8 },
  { name: '1x100', users: 1, concurrency: 100 },
].filter((l) => !opts.only || l.name === opts.only);

/** A database and its service; `tombstones` of them first. @param {number} tombstones */
async function startSide(tombstones) {
  const dataDir = await tempDataDir();
  // Production-like: the en-US linguistic collation managed services default to, and durable.
  const local = await startLocalPostgres({
    dataDir,
    persistent: false,
    durable: true,
    locale: 'icu-en-US',
  });
  await migrate(local.url);
  if (tombstones > 0) {
    const pool = new pg.Pool({ connectionString: local.url, max: 1 });
    // Hashes and tags of no email sent: what many erasures leave, none of them met by a write.
    await pool.query(
      `INSERT INTO erasures
       SELECT sha256(i::text::bytea), ('x' || substr(md5(i::text), 1, 8))::bit(32)::integer,
         now() - interval '1 day', nextval('erasures_generation')
       FROM generate_series(1, $1) AS i`,
      [tombstones],
    );
    await pool.query('VACUUM ANALYZE erasures');
    await pool.end();
  }
  const server = await startServerProcess({
    DATABASE_URL: local.url,
    LOG_LEVEL: 'warn',
    DB_POOL_MAX: '10',
    ERASURE_KEY: KEY,
  });
  return { local, server, pgPid: await postmasterPid(dataDir) };
}

let serial = 0;
/** @param {number} n */
const usersBody = (n) => {
  const tag = `${process.pid}-${serial++}`;
  return Array.from({ length: n }, (_, i) => ({
    email: `c-${tag}-${i}@example.com`,
    name: `User ${i}`,
    phone: '+15551234567',
  }));
};

/** @param {string} baseUrl @param {string} path @param {unknown} body */
async function post(baseUrl, path, body) {
  const res = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  await res.arrayBuffer();
  if (res.status >= 300) throw new Error(`${path}: HTTP ${res.status}`);
}

/**
 * One run: `concurrency` loops posting new users for `seconds`; CPU microseconds a user.
 * @param {Awaited<ReturnType<typeof startSide>>} side @param {typeof LOADS[number]} load
 */
async function run({ server, pgPid }, { users, concurrency }) {
  const pid = /** @type {number} */ (server.child.pid);
  const [serviceBefore, pgBefore] = [await processCpuSeconds(pid), await postgresCpuSeconds(pgPid)];
  const until = Date.now() + Number(opts.seconds) * 1000;
  let sent = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < until) {
        await post(server.baseUrl, '/users', usersBody(users));
        sent += users;
      }
    }),
  );
  const service = (await processCpuSeconds(pid)) - serviceBefore;
  const db = (await postgresCpuSeconds(pgPid)) - pgBefore;
  return { usPerUser: ((service + db) * 1e6) / sent, usersPerSec: sent / Number(opts.seconds) };
}

/**
 * Erases `n` stored users in one request, timed.
 * @param {Awaited<ReturnType<typeof startSide>>} side
 */
async function timedErasure({ server }) {
  const users = usersBody(Number(opts.erase));
  for (let i = 0; i < users.length; i += 1000)
    await post(server.baseUrl, '/users', users.slice(i, i + 1000));
  const started = performance.now();
  await post(
    server.baseUrl,
    '/erasures',
    users.map((u) => ({ email: u.email })),
  );
  return performance.now() - started;
}

const none = await startSide(0);
const many = await startSide(Number(opts.tombstones));
try {
  for (const load of LOADS) {
    for (const side of [none, many]) await run(side, load); // warm-up: `many` learns of tombstones
    /** @type {{ none: number[], many: number[], noneRate: number[], manyRate: number[] }} */
    const r = { none: [], many: [], noneRate: [], manyRate: [] };
    for (let round = 0; round < Number(opts.rounds); round++) {
      const order = round % 2 === 0 ? ['none', 'many'] : ['many', 'none'];
      for (const name of order) {
        const result = await run(name === 'none' ? none : many, load);
        r[/** @type {'none' | 'many'} */ (name)].push(result.usPerUser);
        r[/** @type {'noneRate' | 'manyRate'} */ (`${name}Rate`)].push(result.usersPerSec);
      }
    }
    const ratios = r.many.map((m, i) => m / r.none[i]);
    console.log(
      `${load.name}: no tombstone ${median(r.none).toFixed(1)} µs CPU a user ` +
        `(${median(r.noneRate).toFixed(0)} users/s), ${opts.tombstones} tombstones ` +
        `${median(r.many).toFixed(1)} µs (${median(r.manyRate).toFixed(0)} users/s): ` +
        `${median(ratios).toFixed(3)}x (rounds ${ratios.map((x) => x.toFixed(3)).join(', ')})`,
    );
  }
  const times = [];
  for (let round = 0; round < Number(opts.rounds); round++) times.push(await timedErasure(many));
  console.log(
    `erasing ${opts.erase} stored users in one request beside ${opts.tombstones} tombstones: ` +
      `median ${median(times).toFixed(0)} ms (${times.map((t) => t.toFixed(0)).join(', ')})`,
  );
} finally {
  for (const side of [none, many]) {
    await side.server.stop();
    await side.local.stop();
  }
}
