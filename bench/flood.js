#!/usr/bin/env node
// `npm run bench:flood`: one client floods, another posts small batches; what the quiet one sees.
import { Option, createCommand, wholeNumber } from '@sluice/db/command-line';

const opts = createCommand(
  'npm run bench:flood --',
  "Two named clients against one service process with its default settings, on a fresh PostgreSQL: quiet (small batches from a few connections) alone, noisy (large batches from many connections, never backing off) alone, then both at once. Reports each client's answers, p50/p99 and users/s per phase, as JSON.",
)
  .addOption(
    new Option('--seconds <n>', 'length of each phase')
      .env('SECONDS')
      .argParser(wholeNumber(1))
      .default(15),
  )
  .addOption(
    new Option('--noisy-users <n>', "users in each of noisy's batches")
      .argParser(wholeNumber(1))
      .default(10_000),
  )
  .addOption(
    new Option('--noisy-connections <n>', "noisy's connections")
      .argParser(wholeNumber(1))
      .default(96),
  )
  .addOption(
    new Option('--quiet-users <n>', "users in each of quiet's batches")
      .argParser(wholeNumber(1))
      .default(10),
  )
  .addOption(
    new Option('--quiet-connections <n>', "quiet's connections")
      .argParser(wholeNumber(1))
      .default(4),
  )
  .addOption(
    new Option(
      '--noisy-limits <json>',
      'noisy\'s limits in INGEST_TOKENS (e.g. {"rate":20000,"burst":20000}); default none',
    ),
  )
  .addOption(
    new Option(
      '--log-level <level>',
      "the service's LOG_LEVEL: at debug, each client's time inside the service is reported too",
    ).default('warn'),
  )
  .addOption(
    new Option(
      '--profile <dir>',
      "write the service's CPU profile (node --cpu-prof) into this directory",
    ),
  )
  .addOption(
    new Option(
      '--server <server.js>',
      "another checkout's service/src/server.js, to measure that one instead (before/after; default: this checkout's)",
    ).env('SERVER'),
  )
  .parse()
  .opts();
const SECONDS = /** @type {number} */ (opts.seconds);
const SERVER = /** @type {string | undefined} */ (opts.server);
const NOISY_LIMITS =
  opts.noisyLimits === undefined ? undefined : JSON.parse(/** @type {string} */ (opts.noisyLimits));

const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
const { migrate } = await import('@sluice/db/migrate');
const { startServerProcess } = await import('../test/support/server-process.js');
const { runFloodClient } = await import('./lib/flood-client.js');
const { percentile } = await import('./lib/stats.js');

/** @param {string} m */
const say = (m) => console.error(`[bench:flood] ${m}`);

const TOKENS = { quiet: 'flood-bench-quiet-token', noisy: 'flood-bench-noisy-token' };
const pgServer = await startLocalPostgres({
  dataDir: await tempDataDir('sluice-bench-flood-'),
  persistent: false,
  durable: true,
});
await migrate(pgServer.url);
const ingestTokens = {
  quiet: TOKENS.quiet,
  noisy: NOISY_LIMITS ? { token: TOKENS.noisy, ...NOISY_LIMITS } : TOKENS.noisy,
};
const service = await startServerProcess(
  {
    DATABASE_URL: pgServer.url,
    LOG_LEVEL: opts.logLevel,
    INGEST_TOKENS: JSON.stringify(ingestTokens),
  },
  {
    ...(SERVER ? { script: SERVER } : {}),
    ...(opts.profile ? { nodeArgs: ['--cpu-prof', '--cpu-prof-dir', opts.profile] } : {}),
  },
);
const quiet = {
  baseUrl: service.baseUrl,
  token: TOKENS.quiet,
  tag: 'quiet',
  users: opts.quietUsers,
  connections: opts.quietConnections,
};
const noisy = {
  baseUrl: service.baseUrl,
  token: TOKENS.noisy,
  tag: 'noisy',
  users: opts.noisyUsers,
  connections: opts.noisyConnections,
};

/** @param {typeof quiet[]} clients */
async function phase(clients) {
  const stop = AbortSignal.timeout(SECONDS * 1000);
  // Each phase's emails are new: a client's tag says its phase too.
  const tagged = clients.map((c) => ({ ...c, tag: `${c.tag}${phases++}`, signal: stop }));
  const fromLog = service.logs.length;
  const results = await Promise.all(tagged.map(runFloodClient));
  // The time each client's requests spent inside the service, from the access log (at debug).
  const inside = /** @type {Record<string, number[]>} */ ({});
  for (const line of service.logs.slice(fromLog))
    if (line.msg === 'request completed' && line.client)
      (inside[line.client] ??= []).push(line.responseTime);
  for (const r of results) {
    const times = inside[r.tag.replace(/\d+$/, '')];
    if (times)
      Object.assign(r, {
        insideP50ms: percentile(times, 0.5),
        insideP99ms: percentile(times, 0.99),
      });
  }
  const usersPerSecond = results.reduce((n, r) => n + r.usersPerSecond, 0);
  // Where the time went: the service's own waits and its event loop's lag, as /metrics has them.
  const metrics = await fetch(`${service.baseUrl}/metrics`).then(
    (r) => r.text(),
    () => '',
  );
  const waits = metrics.split('\n').filter((l) => WAIT_METRICS.some((m) => l.startsWith(m)));
  return { clients: results, usersPerSecond, waits };
}
let phases = 0;
const WAIT_METRICS = [
  'sluice_admission_wait_seconds_sum',
  'sluice_admission_wait_seconds_count',
  'sluice_admission_shed_total',
  'sluice_group_commit_wait_seconds_sum',
  'sluice_group_commit_wait_seconds_count',
  'sluice_nodejs_eventloop_lag_p99_seconds',
  'sluice_nodejs_eventloop_lag_mean_seconds',
  'sluice_admission_refused_total',
  'sluice_client_',
];
try {
  say(
    `${SECONDS} s a phase, against ${SERVER ?? 'this checkout'}; quiet ${quiet.users} × ${quiet.connections}, noisy ${noisy.users} × ${noisy.connections}${NOISY_LIMITS ? ` limited ${JSON.stringify(NOISY_LIMITS)}` : ''}`,
  );
  const quietAlone = await phase([quiet]);
  say(`quiet alone: ${JSON.stringify(quietAlone.clients[0])}`);
  const noisyAlone = await phase([noisy]);
  say(`noisy alone: ${JSON.stringify(noisyAlone.clients[0])}`);
  const both = await phase([quiet, noisy]);
  say(`both: ${JSON.stringify(both.clients)}`);
  // The table grows by every phase and a checkpoint may fall in any: the flood alone runs again
  // after both, so that "both" is compared with the flood alone on either side of it.
  const noisyAfter = await phase([noisy]);
  say(`noisy alone again: ${JSON.stringify(noisyAfter.clients[0])}`);
  const q = both.clients[0];
  const soloQ = quietAlone.clients[0];
  console.log(
    JSON.stringify(
      {
        server: SERVER ?? 'this checkout',
        quietAlone,
        noisyAlone,
        both,
        noisyAfter,
        ratios: {
          quietP50: q.p50ms / soloQ.p50ms,
          quietP99: q.p99ms / soloQ.p99ms,
          totalUsersPerSecond: both.usersPerSecond / noisyAlone.usersPerSecond,
          totalUsersPerSecondAgainstBothFloods:
            both.usersPerSecond / ((noisyAlone.usersPerSecond + noisyAfter.usersPerSecond) / 2),
        },
      },
      null,
      2,
    ),
  );
} finally {
  // A profile is written only by a process that exits on its own: SIGTERM, its graceful stop.
  if (opts.profile) service.child.kill('SIGTERM');
  await Promise.race([
    service.exited,
    new Promise((resolve) => setTimeout(resolve, 30_000).unref()),
  ]);
  await service.stop();
  await pgServer.stop();
}
