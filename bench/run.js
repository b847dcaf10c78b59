#!/usr/bin/env node
// `npm run bench`: on a fresh PostgreSQL, the service under k6's single-item and 1000-item tests,
// one after the other, then the COPY ceiling on the same database; a report, a JSON file and a chart
// in bench/results/. `-- --strategies` also runs the batch test under every INSERT_STRATEGY.
// `-- --publish` copies the chart to docs/bench.svg for the README.
import { copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { migrate } from '@sluice/db/migrate';
import { startLocalPostgres, tempDataDir } from '@sluice/db/local-postgres';
import { startServerProcess } from '../test/support/server-process.js';
import { measureCopyCeiling } from './lib/copy-ceiling.js';
import { findK6, runK6 } from './lib/k6-binary.js';
import { postgresCpuSeconds, postmasterPid, processCpuSeconds, sampleRss } from './lib/process-stats.js';
import { markdownTable, svgChart } from './lib/report.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: { strategies: { type: 'boolean', default: false }, publish: { type: 'boolean', default: false } } });
const POOL = Number(process.env.DB_POOL_MAX || 10);
/** @param {string} msg */
const say = (msg) => console.error(`[bench] ${msg}`);

const k6 = await findK6({ log: say });
const dataDir = await tempDataDir('sluice-bench-');
// Durable, like a real deployment: fsync and synchronous commit stay on.
const pg = await startLocalPostgres({ dataDir, persistent: false, durable: true });
await migrate(pg.url);
const pgPid = await postmasterPid(pg.dataDir);
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const outDir = path.join(root, 'bench', 'results');
await mkdir(outDir, { recursive: true });
say(`PostgreSQL on 127.0.0.1:${pg.port}; results in ${path.relative(root, outDir)}`);

/**
 * One k6 script against a freshly started service; CPU and memory read from /proc around it.
 * @param {string} name @param {string} script @param {Record<string, string>} serviceEnv
 */
async function measure(name, script, serviceEnv = {}) {
  const service = await startServerProcess({ DATABASE_URL: pg.url, DB_POOL_MAX: String(POOL), ...serviceEnv });
  const pid = /** @type {number} */ (service.child.pid);
  const summaryFile = path.join(outDir, `${stamp}-${name}-k6.json`);
  const [svc0, db0] = [await processCpuSeconds(pid), await postgresCpuSeconds(pgPid)];
  const stopRss = sampleRss(pid);
  say(`${name}: k6 run k6/${script}`);
  const { code, cpuSeconds: k6CpuSeconds } = await runK6(k6, path.join(root, 'k6', script), { BASE_URL: service.baseUrl, SUMMARY_FILE: summaryFile });
  const [svc1, db1, peakRss] = [await processCpuSeconds(pid), await postgresCpuSeconds(pgPid), await stopRss()];
  service.child.kill('SIGTERM');
  await service.exited;

  const summary = JSON.parse(await readFile(summaryFile, 'utf8'));
  const m = summary.metrics;
  const seconds = summary.state.testRunDurationMs / 1000;
  const d = m.http_req_duration.values;
  return {
    name,
    k6ExitCode: code,
    items: m.inserted_items?.values.count ?? 0,
    seconds,
    itemsPerSec: (m.inserted_items?.values.count ?? 0) / seconds,
    requests: m.http_reqs.values.count,
    requestsPerSec: m.http_reqs.values.rate,
    p50: d.med, p95: d['p(95)'], p99: d['p(99)'],
    errors: m.http_req_failed.values.passes,
    serviceCpuSeconds: svc1 - svc0,
    dbCpuSeconds: db1 - db0,
    servicePeakRssMiB: peakRss,
    k6CpuSeconds,
  };
}

try {
  const rows = [await measure('one', 'stress-test-one.js'), await measure('batch', 'stress-test-batch.js')];
  if (args.strategies) {
    for (const strategy of ['unnest', 'copy']) rows.push(await measure(`batch (${strategy})`, 'stress-test-batch.js', { INSERT_STRATEGY: strategy }));
  }
  const batch = /** @type {typeof rows[number]} */ (rows.find((r) => r.name === 'batch'));
  say(`ceiling: COPY ${batch.items} rows over ${POOL} connections`);
  const db0 = await postgresCpuSeconds(pgPid);
  const copy = await measureCopyCeiling(pg.url, { rows: batch.items, concurrency: POOL, tag: stamp });
  const ceiling = { name: 'COPY ceiling', items: copy.items, seconds: copy.seconds, itemsPerSec: copy.items / copy.seconds, dbCpuSeconds: (await postgresCpuSeconds(pgPid)) - db0 };

  const all = [...rows, ceiling];
  const machine = `${os.cpus().length} × ${os.cpus()[0]?.model.trim()}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, PostgreSQL 17 (embedded, fsync on)`;
  const table = markdownTable(all, ceiling.itemsPerSec);
  const ratio = batch.itemsPerSec / rows[0].itemsPerSec;
  const report = `${table}\n\nbatch/one: ${ratio.toFixed(1)}×; batch is ${((batch.itemsPerSec / ceiling.itemsPerSec) * 100).toFixed(1)}% of the COPY ceiling.\nMachine: ${machine}.\n`;
  await writeFile(path.join(outDir, `${stamp}.json`), JSON.stringify({ machine, pool: POOL, rows: all }, null, 2));
  await writeFile(path.join(outDir, `${stamp}.md`), report);
  const chart = svgChart(all, `sluice, ${stamp.slice(0, 10)}: ${machine}`);
  await writeFile(path.join(outDir, `${stamp}.svg`), chart);
  if (args.publish) {
    await mkdir(path.join(root, 'docs'), { recursive: true });
    await copyFile(path.join(outDir, `${stamp}.svg`), path.join(root, 'docs', 'bench.svg'));
  }
  console.log(`\n${report}`);
  const failedK6 = rows.filter((r) => r.k6ExitCode !== 0).map((r) => r.name);
  if (failedK6.length) say(`k6 thresholds failed for: ${failedK6.join(', ')}`);
  process.exitCode = failedK6.length ? 1 : 0;
} finally {
  await pg.stop();
  await rm(path.dirname(dataDir), { recursive: true, force: true });
}
