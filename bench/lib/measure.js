import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { runK6 } from './k6-binary.js';
import { postgresCpuSeconds, processCpuSeconds, sampleRss } from './process-stats.js';

/**
 * A table the bench empties before a run and counts after it: the ground truth of users written.
 * @param {string} databaseUrl
 */
export async function openTable(databaseUrl) {
  const client = new pg.Client(databaseUrl);
  // A server gone while the client idles (the bench interrupted) fails the next query; it must not
  // also crash the process with an unhandled 'error' event.
  client.on('error', () => {});
  await client.connect();
  return {
    /**
     * Empty, and checkpointed so that no run pays for the previous run's dirty pages; every run
     * then starts from the same small index.
     */
    async reset() {
      await client.query('TRUNCATE users RESTART IDENTITY');
      await client.query('CHECKPOINT');
    },
    /** @returns {Promise<number>} */
    async count() {
      const { rows } = await client.query('SELECT count(*)::int AS n FROM users');
      return rows[0].n;
    },
    /** Row versions written by updates so far (the statistics of every backend that has ended). @returns {Promise<number>} */
    async updates() {
      const { rows } = await client.query(
        "SELECT n_tup_upd::int AS n FROM pg_stat_user_tables WHERE relname = 'users'",
      );
      return rows[0]?.n ?? 0;
    },
    close: () => client.end(),
  };
}

/**
 * One k6 script against a freshly started server process; CPU and memory read from /proc around
 * it, rows counted in the table afterwards.
 * @param {{
 *   k6: string, script: string, k6Env: Record<string, string>, summaryFile: string,
 *   start: () => Promise<{ child: import('node:child_process').ChildProcess, baseUrl: string, exited: Promise<unknown> }>,
 *   pgPid: number, table?: Awaited<ReturnType<typeof openTable>>, poolerPid?: number,
 * }} options  poolerPid: a connection pooler between the service and PostgreSQL, whose CPU is read too
 */
export async function measureRun({
  k6,
  script,
  k6Env,
  summaryFile,
  start,
  pgPid,
  table,
  poolerPid,
}) {
  await table?.reset();
  const updates0 = await table?.updates();
  const server = await start();
  const pid = /** @type {number} */ (server.child.pid);
  let measured;
  try {
    const pooler = async () => (poolerPid === undefined ? undefined : processCpuSeconds(poolerPid));
    const [svc0, db0, pool0] = [
      await processCpuSeconds(pid),
      await postgresCpuSeconds(pgPid),
      await pooler(),
    ];
    const stopRss = sampleRss(pid);
    const { code, cpuSeconds: k6CpuSeconds } = await runK6(k6, script, {
      ...k6Env,
      BASE_URL: server.baseUrl,
      SUMMARY_FILE: summaryFile,
    });
    const [svc1, db1, pool1, peakRss] = [
      await processCpuSeconds(pid),
      await postgresCpuSeconds(pgPid),
      await pooler(),
      await stopRss(),
    ];
    const poolerCpuSeconds = pool0 === undefined || pool1 === undefined ? undefined : pool1 - pool0;
    measured = {
      code,
      k6CpuSeconds,
      serviceCpuSeconds: svc1 - svc0,
      dbCpuSeconds: db1 - db0,
      poolerCpuSeconds,
      servicePeakRssMiB: peakRss,
    };
  } finally {
    // Never left running behind a failed run.
    server.child.kill('SIGTERM');
    await server.exited;
  }
  const rows = table ? await table.count() : undefined;
  // The service's backends have ended with it, and each flushed its statistics on the way out.
  const rowUpdates =
    table && updates0 !== undefined ? (await table.updates()) - updates0 : undefined;

  const summary = JSON.parse(await readFile(summaryFile, 'utf8'));
  const m = summary.metrics;
  const seconds = summary.state.testRunDurationMs / 1000;
  const d = m.http_req_duration.values;
  const k6Items = m.inserted_items?.values.count ?? 0;
  const sent = m.sent_items?.values.count ?? k6Items;
  const items = rows ?? k6Items;
  return {
    k6ExitCode: measured.code,
    seconds,
    rows,
    k6Items,
    items,
    itemsPerSec: items / seconds,
    sent,
    sentPerSec: sent / seconds,
    rowUpdates,
    requests: m.http_reqs.values.count,
    requestsPerSec: m.http_reqs.values.rate,
    p50: d.med,
    p95: d['p(95)'],
    p99: d['p(99)'],
    errors: m.http_req_failed.values.passes,
    serviceCpuSeconds: measured.serviceCpuSeconds,
    dbCpuSeconds: measured.dbCpuSeconds,
    poolerCpuSeconds: measured.poolerCpuSeconds,
    servicePeakRssMiB: measured.servicePeakRssMiB,
    k6CpuSeconds: measured.k6CpuSeconds,
  };
}
