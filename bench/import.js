#!/usr/bin/env node
// `npm run bench:import`: one streamed request of many users (NDJSON, then CSV) against `psql \copy`
// of the same rows into the same empty table, side by side in one run, with the service's peak RSS.
import { once } from 'node:events';
import { Option, createCommand, listOf, wholeNumber } from '@sluice/db/command-line';

const opts = createCommand(
  'npm run bench:import --',
  "Streams --users users in one POST /users request (NDJSON, then CSV) to one service process on a fresh, durable PostgreSQL (ICU en-US), and loads the same rows with `psql \\copy` (CSV) into the same empty table with its constraints; then a body whose last line is invalid. Each round loads psql's, then each body's, so that a noisy machine slows them alike. Reports the median seconds, rows/s, each rate against psql's (the median of the rounds' ratios), the CPU seconds of the service and of PostgreSQL for each body, and the service's peak RSS over all rounds, as JSON on stdout. Needs psql on PATH.",
)
  .addOption(
    new Option('--users <n>', 'users in each body')
      .env('USERS')
      .argParser(wholeNumber(1))
      .default(1_000_000),
  )
  .addOption(
    new Option('--formats <list>', 'the bodies to stream')
      .argParser(listOf(['ndjson', 'csv']))
      .default(['ndjson', 'csv']),
  )
  .addOption(
    new Option('--rounds <n>', 'times each load runs, interleaved')
      .env('ROUNDS')
      .argParser(wholeNumber(1))
      .default(3),
  )
  .addOption(
    new Option(
      '--server <server.js>',
      "another checkout's service/src/server.js, to measure that one instead",
    ).env('SERVER'),
  )
  .addOption(
    new Option(
      '--prefer <value>',
      'a Prefer header sent with each body, e.g. "invalid=quarantine; max-invalid=10000"',
    ),
  )
  .addOption(
    new Option(
      '--invalid-every <n>',
      'every nth user of each body is invalid (its email has no @): 100 is 1%',
    ).argParser(wholeNumber(1)),
  )
  .parse()
  .opts();
const USERS = /** @type {number} */ (opts.users);
const FORMATS = /** @type {('ndjson' | 'csv')[]} */ (opts.formats);
const SERVER = /** @type {string | undefined} */ (opts.server);
const ROUNDS = /** @type {number} */ (opts.rounds);
const PREFER = /** @type {string | undefined} */ (opts.prefer);
const INVALID_EVERY = /** @type {number | undefined} */ (opts.invalidEvery);

const { createReadStream, createWriteStream } = await import('node:fs');
const { mkdtemp, rm, stat } = await import('node:fs/promises');
const http = await import('node:http');
const os = await import('node:os');
const path = await import('node:path');
const { execFile } = await import('node:child_process');
const { promisify } = await import('node:util');
const pg = (await import('pg')).default;
const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
const { migrate } = await import('@sluice/db/migrate');
const { startServerProcess } = await import('../test/support/server-process.js');
const { SAMPLE_HASH } = await import('../test/support/users.js');
const { postgresCpuSeconds, postmasterPid, processCpuSeconds, sampleRss } =
  await import('./lib/process-stats.js');
const { median } = await import('./lib/stats.js');

/** @param {number} n */
const round2 = (n) => Number(n.toFixed(2));
/** @param {string} m */
const say = (m) => console.error(`[bench:import] ${m}`);
const CONTENT_TYPES = { ndjson: 'application/x-ndjson', csv: 'text/csv' };

/**
 * Writes `count` users as NDJSON or CSV, with backpressure; returns the file's size.
 * @param {string} file @param {'ndjson' | 'csv'} format @param {number} count @param {string} [lastLine] @param {number} [invalidEvery]  every nth user invalid
 */
async function writeUsers(file, format, count, lastLine, invalidEvery) {
  const out = createWriteStream(file);
  let text = format === 'csv' ? 'email,name,phone,passwordHash\n' : '';
  for (let i = 0; i < count; i++) {
    const email =
      invalidEvery && i % invalidEvery === invalidEvery - 1
        ? `user-${i}-import.test`
        : `user-${i}@import.test`;
    const phone = `+1555${String(i % 1e7).padStart(7, '0')}`;
    text +=
      format === 'csv'
        ? `${email},User ${i},${phone},"${SAMPLE_HASH}"\n`
        : `{"email":"${email}","name":"User ${i}","phone":"${phone}","passwordHash":"${SAMPLE_HASH}"}\n`;
    if (text.length > 1 << 20) {
      if (!out.write(text)) await once(out, 'drain');
      text = '';
    }
  }
  out.end(text + (lastLine ?? ''));
  await once(out, 'finish');
  return (await stat(file)).size;
}

/**
 * POSTs a file as one streamed body; resolves with the status and the answer.
 * @param {string} baseUrl @param {string} file @param {'ndjson' | 'csv'} format
 * @returns {Promise<{ status: number, body: any }>}
 */
function postFile(baseUrl, file, format) {
  return new Promise((resolve, reject) => {
    const req = http.request(`${baseUrl}/users`, {
      method: 'POST',
      headers: {
        'content-type': CONTENT_TYPES[format],
        'transfer-encoding': 'chunked',
        ...(PREFER ? { prefer: PREFER } : {}),
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    createReadStream(file).on('error', reject).pipe(req);
  });
}

const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-bench-import-'));
const pgDataDir = await tempDataDir('sluice-bench-import-pg-');
const pgServer = await startLocalPostgres({
  dataDir: pgDataDir,
  persistent: false,
  durable: true,
  locale: 'icu-en-US',
});
await migrate(pgServer.url);
const admin = new pg.Client(pgServer.url);
await admin.connect();
const service = await startServerProcess(
  { DATABASE_URL: pgServer.url, LOG_LEVEL: 'warn' },
  SERVER ? { script: SERVER } : {},
);
const pid = /** @type {number} */ (service.child.pid);
const pgPid = await postmasterPid(pgDataDir);
/**
 * CPU seconds so far: the service's, and PostgreSQL's (every backend). Not taken for psql's load:
 * its backend has ended, and is not yet reaped, when it would be read.
 */
const cpu = async () => ({
  service: await processCpuSeconds(pid),
  postgres: await postgresCpuSeconds(pgPid),
});
/** @param {{ service: number, postgres: number }} before */
const cpuSince = async (before) => {
  const now = await cpu();
  return { service: now.service - before.service, postgres: now.postgres - before.postgres };
};
const empty = async () => {
  await admin.query('TRUNCATE users');
  await admin.query('CHECKPOINT');
};
try {
  const files = { ndjson: path.join(dir, 'users.ndjson'), csv: path.join(dir, 'users.csv') };
  const sizes = {
    ndjson: await writeUsers(files.ndjson, 'ndjson', USERS, undefined, INVALID_EVERY),
    csv: await writeUsers(files.csv, 'csv', USERS, undefined, INVALID_EVERY),
  };
  // psql loads valid rows only (a CHECK refuses the rest): its own file when some are invalid.
  const psqlCsv = INVALID_EVERY ? path.join(dir, 'psql.csv') : files.csv;
  if (INVALID_EVERY) await writeUsers(psqlCsv, 'csv', USERS);
  say(
    `${USERS.toLocaleString('en')} users: NDJSON ${(sizes.ndjson / 1e6).toFixed(1)} MB, CSV ${(sizes.csv / 1e6).toFixed(1)} MB`,
  );

  /** @type {Record<string, { seconds: number[], ratios: number[], peaks: number[], serviceCpu: number[], postgresCpu: number[], answer?: unknown, status?: number }>} */
  const runs = Object.fromEntries(
    ['psql', ...FORMATS].map((load) => [
      load,
      { seconds: [], ratios: [], peaks: [], serviceCpu: [], postgresCpu: [] },
    ]),
  );
  for (let round = 1; round <= ROUNDS; round++) {
    await empty();
    let started = performance.now();
    await promisify(execFile)('psql', [
      pgServer.url,
      '-v',
      'ON_ERROR_STOP=1',
      '-c',
      `\\copy users (email, name, phone, password_hash) FROM '${psqlCsv}' WITH (FORMAT csv, HEADER true)`,
    ]);
    const psqlSeconds = (performance.now() - started) / 1000;
    runs.psql.seconds.push(psqlSeconds);
    say(
      `round ${round}: psql \\copy: ${psqlSeconds.toFixed(2)} s, ${Math.round(USERS / psqlSeconds).toLocaleString('en')} rows/s`,
    );
    for (const format of FORMATS) {
      await empty();
      const stopSampling = sampleRss(pid, 50);
      const cpuBefore = await cpu();
      started = performance.now();
      const answer = await postFile(service.baseUrl, files[format], format);
      const seconds = (performance.now() - started) / 1000;
      const used = await cpuSince(cpuBefore);
      const peak = await stopSampling();
      Object.assign(runs[format], { status: answer.status, answer: answer.body });
      runs[format].seconds.push(seconds);
      runs[format].serviceCpu.push(used.service);
      runs[format].postgresCpu.push(used.postgres);
      runs[format].ratios.push(psqlSeconds / seconds);
      runs[format].peaks.push(peak);
      say(
        `round ${round}: ${format}: ${answer.status} in ${seconds.toFixed(2)} s, ${Math.round(USERS / seconds).toLocaleString('en')} rows/s, ${(psqlSeconds / seconds).toFixed(2)}x psql, peak RSS ${Math.round(peak)} MiB`,
      );
    }
  }

  /** @type {Record<string, unknown>[]} */
  const rows = Object.entries(runs).map(([load, run]) => {
    const seconds = median(run.seconds);
    return load === 'psql'
      ? {
          load: 'psql \\copy (CSV)',
          seconds: round2(seconds),
          rowsPerSecond: Math.round(USERS / seconds),
          vsPsql: 1,
          perRound: run.seconds.map(round2),
        }
      : {
          load: `sluice ${load}`,
          status: run.status,
          answer: run.answer,
          seconds: round2(seconds),
          rowsPerSecond: Math.round(USERS / seconds),
          vsPsql: round2(median(run.ratios)),
          vsPsqlPerRound: run.ratios.map(round2),
          cpuSeconds: {
            service: round2(median(run.serviceCpu)),
            postgres: round2(median(run.postgresCpu)),
          },
          rssPeakMiB: Math.round(Math.max(...run.peaks)),
        };
  });

  await empty();
  const invalidLast = path.join(dir, 'invalid-last.ndjson');
  await writeUsers(invalidLast, 'ndjson', USERS, '{"email":"not-an-email","name":"Last"}\n');
  const stopSampling = sampleRss(pid, 50);
  const started = performance.now();
  const refused = await postFile(service.baseUrl, invalidLast, 'ndjson');
  const seconds = (performance.now() - started) / 1000;
  const stored = (await admin.query('SELECT count(*)::int AS n FROM users')).rows[0].n;
  rows.push({
    load: 'sluice ndjson, last line invalid',
    status: refused.status,
    answer: { ...refused.body, message: refused.body.message },
    seconds: Number(seconds.toFixed(2)),
    rssPeakMiB: Math.round(await stopSampling()),
    stored,
  });
  console.log(JSON.stringify({ users: USERS, rounds: ROUNDS, bytes: sizes, rows }, null, 2));
} finally {
  await service.stop();
  await admin.end();
  await pgServer.stop();
  await rm(dir, { recursive: true, force: true });
}
