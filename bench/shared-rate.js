#!/usr/bin/env node
// `npm run bench:shared-rate`: a client's rate over a deployment of three replicas, one of them a
// cluster of two workers, on one PostgreSQL, directly and behind PgBouncer; or (--cost) what a rate
// costs one process.
import { Option, createCommand, listOf, wholeNumber } from '@sluice/db/command-line';

const opts = createCommand(
  'npm run bench:shared-rate --',
  "Three replicas of the service (the first with WORKERS=2: four processes) on a fresh PostgreSQL, each way of --via: a client without a rate (other: small batches) alone, then beside a client with a rate (bulk: large batches from many connections spread evenly over the replicas, never backing off). Reports bulk's users stored a second against its rate, other's 2xx share and p99 against its solo p99, the lease statements a bulk request, and the service's CPU, as JSON. With --cost, one process instead: a client sending at its rate, paced, against the same load of a client without a rate, round after round: CPU a request and statements a request.",
)
  .addOption(
    new Option('--seconds <n>', 'length of the phase with both clients')
      .env('SECONDS')
      .argParser(wholeNumber(1))
      .default(30),
  )
  .addOption(
    new Option('--solo-seconds <n>', "length of other's phase alone")
      .argParser(wholeNumber(1))
      .default(10),
  )
  .addOption(
    new Option('--rate <n>', "bulk's rate, users a second").argParser(wholeNumber(1)).default(5000),
  )
  .addOption(
    new Option('--burst <n>', "bulk's burst, users (default: its rate)").argParser(wholeNumber(1)),
  )
  .addOption(
    new Option('--users <n>', "users in each of bulk's batches")
      .argParser(wholeNumber(1))
      .default(1000),
  )
  .addOption(
    new Option('--connections <n>', "bulk's connections, spread evenly over the replicas")
      .argParser(wholeNumber(1))
      .default(24),
  )
  .addOption(
    new Option('--other-users <n>', "users in each of other's batches")
      .argParser(wholeNumber(1))
      .default(10),
  )
  .addOption(
    new Option('--other-connections <n>', "other's connections, spread evenly over the replicas")
      .argParser(wholeNumber(1))
      .default(3),
  )
  .addOption(
    new Option(
      '--via <ways>',
      'how the replicas reach PostgreSQL: direct, pgbouncer (transaction pooling)',
    )
      .argParser(listOf(['direct', 'pgbouncer']))
      .default(['direct', 'pgbouncer']),
  )
  .addOption(
    new Option('--cost', 'one process: a rated client at its rate against an unlimited one, paced'),
  )
  .addOption(
    new Option('--rounds <n>', 'with --cost: rounds of (unlimited, rated)')
      .argParser(wholeNumber(1))
      .default(3),
  )
  .addOption(
    new Option(
      '--server <server.js>',
      "another checkout's service/src/server.js, to measure that one instead (before/after)",
    ).env('SERVER'),
  )
  .parse()
  .opts();

const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
const { migrate } = await import('@sluice/db/migrate');
const { default: pg } = await import('pg');
const { startPgBouncer } = await import('../test/support/pgbouncer.js');
const { startServerProcess } = await import('../test/support/server-process.js');
const { runFloodClient } = await import('./lib/flood-client.js');
const { runPacedClient } = await import('./lib/paced-client.js');
const { processCpuSeconds } = await import('./lib/process-stats.js');
const { median, percentile } = await import('./lib/stats.js');

/** @param {string} m */
const say = (m) => console.error(`[bench:shared-rate] ${m}`);
const SERVER = /** @type {string | undefined} */ (opts.server);
const RATE = /** @type {number} */ (opts.rate);
const BURST = /** @type {number} */ (opts.burst ?? RATE);
const TOKENS = { bulk: 'shared-rate-bench-bulk', other: 'shared-rate-bench-other' };
const INGEST_TOKENS = JSON.stringify({
  bulk: { token: TOKENS.bulk, rate: RATE, burst: BURST },
  other: TOKENS.other,
});
const STATEMENTS = 'sluice_rate_lease_statements_total';

/** @typedef {Awaited<ReturnType<typeof startServerProcess>>} Server */
/**
 * @typedef {{ cpuMsARequest: number, statementsARequest: number,
 *   statuses: Record<string, number> }} CostRound
 */

/**
 * The service with `env`, once each of its `workers` listens.
 * @param {Record<string, string>} env @param {number} workers
 */
async function startService(env, workers) {
  const server = await startServerProcess(
    { INGEST_TOKENS, ...env, ...(workers > 1 ? { WORKERS: String(workers) } : {}) },
    SERVER ? { script: SERVER } : {},
  );
  await server.waitForLog(() => listening(server).length >= workers);
  return server;
}

/** The pids of the processes that serve (a cluster's workers). @param {Server} server */
const listening = (server) =>
  server.logs.filter((l) => l.msg === 'listening').map((l) => /** @type {number} */ (l.pid));

/** CPU seconds of every process of the services, so far. @param {Server[]} servers */
async function serviceCpu(servers) {
  let total = 0;
  for (const server of servers) {
    const pids = new Set([/** @type {number} */ (server.child.pid), ...listening(server)]);
    for (const pid of pids) total += await processCpuSeconds(pid);
  }
  return total;
}

/**
 * The lease statements the services sent so far (a cluster's /metrics holds its workers').
 * @param {Server[]} servers
 */
async function statementsSent(servers) {
  let total = 0;
  for (const server of servers) {
    const text = await fetch(`${server.baseUrl}/metrics`).then(
      (r) => r.text(),
      () => '',
    );
    for (const line of text.split('\n'))
      if (line.startsWith(`${STATEMENTS}{`)) total += Number(line.split(' ').pop());
  }
  return total;
}

/** A fresh, migrated database of the server's. @param {string} serverUrl @param {string} name */
async function freshDatabase(serverUrl, name) {
  const admin = new pg.Client(serverUrl);
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${name}`);
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  await migrate(url.toString());
  return url.toString();
}

/**
 * A client spread evenly over the servers, `connections` in all, for `seconds`: what it saw.
 * @param {Server[]} servers
 * @param {{ token: string, tag: string, users: number, connections: number, seconds: number }} c
 */
async function spread(servers, { token, tag, users, connections, seconds }) {
  const signal = AbortSignal.timeout(seconds * 1000);
  const runs = [];
  for (const [i, server] of servers.entries()) {
    const own =
      Math.floor(connections / servers.length) + (i < connections % servers.length ? 1 : 0);
    if (own > 0)
      runs.push(
        runFloodClient({
          baseUrl: server.baseUrl,
          token,
          tag: `${tag}${i}`,
          users,
          connections: own,
          signal,
          withLatencies: true,
        }),
      );
  }
  return merged(await Promise.all(runs), users);
}

/**
 * One client's results over several servers as one.
 * @param {Awaited<ReturnType<typeof runFloodClient>>[]} results @param {number} users
 */
function merged(results, users) {
  /** @type {Record<string, number>} */ const statuses = {};
  for (const r of results)
    for (const [status, n] of Object.entries(r.statuses))
      statuses[status] = (statuses[status] ?? 0) + n;
  const requests = results.reduce((n, r) => n + r.requests, 0);
  const ok = Object.entries(statuses)
    .filter(([status]) => status.startsWith('2'))
    .reduce((n, [, count]) => n + count, 0);
  const latencies = results.flatMap((r) => r.latencies ?? []);
  const seconds = Math.max(...results.map((r) => r.seconds));
  return {
    statuses,
    requests,
    okShare: requests === 0 ? 0 : ok / requests,
    usersPerSecond: Math.round((ok * users) / seconds),
    p50ms: Math.round(percentile(latencies, 0.5) ?? NaN),
    p99ms: Math.round(percentile(latencies, 0.99) ?? NaN),
  };
}

/**
 * The deployment reaching PostgreSQL `via`: other alone, then bulk and other together.
 * @param {'direct' | 'pgbouncer'} via @param {string} serverUrl
 */
async function deployment(via, serverUrl) {
  const databaseUrl = await freshDatabase(serverUrl, `bench_shared_rate_${via}`);
  const bouncer =
    via === 'pgbouncer'
      ? await startPgBouncer({ upstreamUrl: databaseUrl, poolSize: 16 })
      : undefined;
  const url = bouncer?.url ?? databaseUrl;
  const servers = await Promise.all([2, 1, 1].map((w) => startService({ DATABASE_URL: url }, w)));
  const other = {
    token: TOKENS.other,
    users: opts.otherUsers,
    connections: opts.otherConnections,
  };
  try {
    say(`${via}: other alone for ${opts.soloSeconds} s`);
    const solo = await spread(servers, { ...other, tag: `solo${via}`, seconds: opts.soloSeconds });
    const [cpu, statements] = [await serviceCpu(servers), await statementsSent(servers)];
    say(`${via}: bulk (${RATE}/s, burst ${BURST}) and other for ${opts.seconds} s`);
    const [bulk, beside] = await Promise.all([
      spread(servers, {
        token: TOKENS.bulk,
        tag: `bulk${via}`,
        users: opts.users,
        connections: opts.connections,
        seconds: opts.seconds,
      }),
      spread(servers, { ...other, tag: `beside${via}`, seconds: opts.seconds }),
    ]);
    const sent = (await statementsSent(servers)) - statements;
    const cpuSeconds = (await serviceCpu(servers)) - cpu;
    const taken = bulk.statuses['201'] ?? 0;
    return {
      via,
      bulk: { ...bulk, ofRate: bulk.usersPerSecond / RATE },
      other: { solo, beside, p99AgainstSolo: beside.p99ms / solo.p99ms },
      leaseStatements: sent,
      leaseStatementsPerBulkRequest: sent / bulk.requests,
      leaseStatementsPerBulkRequestTaken: taken === 0 ? NaN : sent / taken,
      serviceCpuSeconds: Math.round(cpuSeconds * 10) / 10,
    };
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await bouncer?.stop();
  }
}

/**
 * One process: a client at its rate (paced) and a client without a rate at the same pace, round
 * after round: the service's CPU a request, and lease statements a request.
 * @param {string} serverUrl
 */
async function cost(serverUrl) {
  const databaseUrl = await freshDatabase(serverUrl, 'bench_shared_rate_cost');
  const server = await startService({ DATABASE_URL: databaseUrl }, 1);
  const perSecond = RATE / opts.users;
  /** @type {Record<'rated' | 'unlimited', CostRound[]>} */
  const rounds = { rated: [], unlimited: [] };
  try {
    for (let round = 0; round < opts.rounds; round++)
      for (const kind of /** @type {const} */ (['unlimited', 'rated'])) {
        const [cpu, statements] = [await serviceCpu([server]), await statementsSent([server])];
        const { requests, statuses } = await runPacedClient({
          baseUrl: server.baseUrl,
          token: kind === 'rated' ? TOKENS.bulk : TOKENS.other,
          tag: `${kind}${round}`,
          users: opts.users,
          perSecond,
          seconds: opts.seconds,
        });
        const cpuMsARequest = (((await serviceCpu([server])) - cpu) * 1000) / requests;
        const statementsARequest = ((await statementsSent([server])) - statements) / requests;
        rounds[kind].push({ cpuMsARequest, statementsARequest, statuses });
        say(
          `${kind} round ${round + 1}: ${cpuMsARequest.toFixed(2)} ms CPU a request, ${statementsARequest.toFixed(3)} statements a request, ${JSON.stringify(statuses)}`,
        );
      }
  } finally {
    await server.stop();
  }
  const cpuOf = (/** @type {'rated' | 'unlimited'} */ kind) =>
    median(rounds[kind].map((r) => r.cpuMsARequest));
  return {
    pace: `${opts.users} users × ${perSecond} a second, ${opts.seconds} s a round`,
    rounds,
    ratedCpuAgainstUnlimited: cpuOf('rated') / cpuOf('unlimited'),
    statementsARatedRequest: median(rounds.rated.map((r) => r.statementsARequest)),
  };
}

const pgServer = await startLocalPostgres({
  dataDir: await tempDataDir('sluice-bench-shared-rate-'),
  persistent: false,
  durable: true,
});
try {
  say(`against ${SERVER ?? 'this checkout'}`);
  const results = opts.cost
    ? await cost(pgServer.url)
    : await (async () => {
        const found = [];
        for (const via of opts.via) found.push(await deployment(via, pgServer.url));
        return found;
      })();
  console.log(
    JSON.stringify(
      { server: SERVER ?? 'this checkout', rate: RATE, burst: BURST, results },
      null,
      2,
    ),
  );
} finally {
  await pgServer.stop();
}
