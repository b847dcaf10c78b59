#!/usr/bin/env node
// `npm run bench:burst`: a burst of large requests, then of single users, against one service process with its default settings.
import { Option, createCommand, wholeNumber } from '@sluice/db/command-line';

const opts = createCommand(
  'npm run bench:burst --',
  "A burst of large requests, then of single users, against one service process with its default settings, on a fresh PostgreSQL: large requests at once (about 1 MB each), then single-user requests at once, then every refused batch retried after Retry-After. Reports the service's peak RSS, the answers, what admission control shed, and the time to drain.",
)
  .addOption(
    new Option('--large <n>', 'large requests sent at once')
      .env('LARGE')
      .argParser(wholeNumber(1))
      .default(128),
  )
  .addOption(
    new Option('--users <n>', 'users in each large request')
      .env('USERS')
      .argParser(wholeNumber(1))
      .default(10_000),
  )
  .addOption(
    new Option('--singles <n>', 'single-user requests sent at once')
      .env('SINGLES')
      .argParser(wholeNumber(0))
      .default(2000),
  )
  .addOption(
    new Option(
      '--server <server.js>',
      "another checkout's service/src/server.js, to measure that one instead (before/after; default: this checkout's)",
    ).env('SERVER'),
  )
  .parse()
  .opts();
const LARGE = /** @type {number} */ (opts.large);
const USERS = /** @type {number} */ (opts.users);
const SINGLES = /** @type {number} */ (opts.singles);
const SERVER = /** @type {string | undefined} */ (opts.server);

const { default: pg } = await import('pg');
const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
const { migrate } = await import('@sluice/db/migrate');
const { runBurst } = await import('../test/support/burst.js');
const { startServerProcess } = await import('../test/support/server-process.js');
const { sampleRss } = await import('./lib/process-stats.js');

/** @param {string} m */
const say = (m) => console.error(`[bench:burst] ${m}`);

const pgServer = await startLocalPostgres({
  dataDir: await tempDataDir('sluice-bench-burst-'),
  persistent: false,
  durable: true,
});
await migrate(pgServer.url);
const db = new pg.Pool({ connectionString: pgServer.url, max: 2 });
// The bench's own connections may see PostgreSQL stop at the end: not a failure of the service.
db.on('error', () => {});
const service = await startServerProcess(
  { DATABASE_URL: pgServer.url, LOG_LEVEL: 'warn' },
  SERVER ? { script: SERVER } : {},
);
try {
  say(`${LARGE} × ${USERS} users, then ${SINGLES} × 1 user, against ${SERVER ?? 'this checkout'}`);
  const stopSampling = sampleRss(/** @type {number} */ (service.child.pid), 50);
  // Where the memory is: the largest V8 heap and off-heap (Buffer) figures the service reported.
  /** @type {Record<string, number>} */
  const peaks = {};
  const watch = setInterval(async () => {
    const text = await fetch(`${service.baseUrl}/metrics`).then(
      (r) => r.text(),
      () => '',
    );
    for (const name of [
      'sluice_nodejs_heap_size_total_bytes',
      'sluice_nodejs_heap_size_used_bytes',
      'sluice_nodejs_external_memory_bytes',
    ]) {
      const value = Number(new RegExp(`^${name} (\\d+)`, 'm').exec(text)?.[1] ?? 0) / 2 ** 20;
      peaks[name] = Math.max(peaks[name] ?? 0, Math.round(value));
    }
  }, 200);
  const result = await runBurst({
    baseUrl: service.baseUrl,
    large: LARGE,
    usersPerLarge: USERS,
    singles: SINGLES,
    retryForMs: 120_000,
    countStored: async (tag) =>
      (
        await db.query('SELECT count(*)::int AS n FROM users WHERE email LIKE $1', [
          `user-${tag}-%`,
        ])
      ).rows[0].n,
  });
  const peakRssMiB = Math.round(await stopSampling());
  clearInterval(watch);
  const stored = (await db.query('SELECT count(*)::int AS n FROM users')).rows[0].n;
  const metrics = await (await fetch(`${service.baseUrl}/metrics`)).text();
  const shed = metrics.split('\n').filter((l) => l.startsWith('sluice_admission_shed_total'));
  console.log(
    JSON.stringify(
      {
        requests: { large: LARGE, usersPerLarge: USERS, singles: SINGLES },
        peakRssMiB,
        peakMiB: peaks,
        stored,
        ...result,
        unacceptable: result.unacceptable.slice(0, 5),
        shed,
      },
      null,
      2,
    ),
  );
} finally {
  await service.stop();
  await db.end();
  await pgServer.stop();
}
