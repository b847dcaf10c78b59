#!/usr/bin/env node
// `npm run bench`: the load tests and the capacity experiment; its usage (`npm run bench -- --help`)
// says what each part does. Adding a load or a variant is one line in bench/lib/capacity.js.
import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  InvalidArgumentError,
  Option,
  createCommand,
  listOf,
  wholeNumber,
} from '@sluice/db/command-line';
import {
  COMPARED,
  LOADS,
  OPT_IN_VARIANTS,
  THROUGH_POOLER,
  VARIANTS,
  baseVariant,
  credentialsFor,
  planRuns,
  summarise,
} from './lib/capacity.js';

const LOAD_IDS = LOADS.map((l) => l.id);
const VARIANT_NAMES = Object.keys(VARIANTS);
const DEFAULT_VARIANTS = VARIANT_NAMES.filter((v) => !OPT_IN_VARIANTS.includes(v));
const opts = createCommand(
  'npm run bench --',
  `Two experiments on one fresh, production-like PostgreSQL (en-US ICU collation, fsync and synchronous commit on), the service started afresh for each run:
reference: the load tests under k6's own profiles, then the COPY ceiling;
capacity: a closed loop at each load, sluice's variants and the naive endpoint it replaces interleaved, the sluice/naive ratio per round.
A report, a JSON file and charts land in bench/results/.`,
)
  .option('--reference', 'run only the reference experiment')
  .option('--capacity', 'run only the capacity experiment')
  .option('--strategies', 'reference: add the batch profile under every INSERT_STRATEGY')
  .addOption(
    new Option('--loads <ids>', 'capacity: these loads only, comma-separated')
      .argParser(listOf(LOAD_IDS))
      .default(LOAD_IDS, LOAD_IDS.join(',')),
  )
  .addOption(
    new Option('--variants <names>', "capacity: these of sluice's variants only, comma-separated")
      .argParser(listOf(VARIANT_NAMES))
      .default(
        DEFAULT_VARIANTS,
        `${DEFAULT_VARIANTS.join(',')}; also ${OPT_IN_VARIANTS.join(', ')}`,
      ),
  )
  .option('--rounds <n>', 'capacity: rounds of every load and variant', wholeNumber(1), 2)
  .option(
    '--duration <k6 duration>',
    'capacity: the length of one run',
    (value) => {
      if (!/^\d+(ms|s|m)$/.test(value))
        throw new InvalidArgumentError('Expected a k6 duration such as 10s.');
      return value;
    },
    '10s',
  )
  .addOption(
    new Option('--pool <n>', "the service's pool, and the COPY ceiling's connections")
      .env('DB_POOL_MAX')
      .argParser(wholeNumber(1))
      .default(10),
  )
  .addOption(
    new Option(
      '--compare <server.js>',
      "capacity: run every variant on another checkout's service/src/server.js too, side by side (as <variant>@compare)",
    ).env('COMPARE_SERVER'),
  )
  .option('--publish', 'copy the charts to docs/')
  .option(
    '--cpu-prof <dir>',
    'write a V8 CPU profile of every sluice run into this directory (node --cpu-prof; it slows the service, so its figures are not comparable)',
  )
  .parse()
  .opts();
const runReference = opts.reference || !opts.capacity;
const runCapacity = opts.capacity || !opts.reference;
const loads = /** @type {string[]} */ (opts.loads).map(
  (id) => /** @type {import('./lib/capacity.js').Load} */ (LOADS.find((l) => l.id === id)),
);
const COMPARE_SERVER = /** @type {string | undefined} */ (opts.compare);
const variants = /** @type {string[]} */ (opts.variants).flatMap((v) =>
  COMPARE_SERVER ? [v, `${v}${COMPARED}`] : [v],
);
const rounds = /** @type {number} */ (opts.rounds);
const POOL = /** @type {number} */ (opts.pool);
const PROFILE_ARGS = opts.cpuProf
  ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(String(opts.cpuProf))}`]
  : [];

// What starts or measures anything is loaded once the command line is known to be good.
const { default: pg } = await import('pg');
const { migrate } = await import('@sluice/db/migrate');
const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
const { startServerProcess } = await import('../test/support/server-process.js');
const { startOtlpReceiver } = await import('../test/support/otlp-receiver.js');
const { startPgBouncer } = await import('../test/support/pgbouncer.js');
const { measureCopyCeiling } = await import('./lib/copy-ceiling.js');
const { findK6 } = await import('./lib/k6-binary.js');
const { measureRun, openTable } = await import('./lib/measure.js');
const { postgresCpuSeconds, postmasterPid } = await import('./lib/process-stats.js');
const { againstTable, capacityTable, markdownTable, ratioChart, runsTable, svgChart } =
  await import('./lib/report.js');
const { createNaiveDatabase } = await import('./naive/schema.js');

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NAIVE_SERVER = path.join(root, 'bench', 'naive', 'server.js');
const NOOP_SERVER = path.join(root, 'bench', 'noop', 'server.js');
/** @param {string} msg */
const say = (msg) => console.error(`[bench] ${msg}`);

const k6 = await findK6({ log: say });
const dataDir = await tempDataDir('sluice-bench-');
// Production-like: the en-US linguistic collation managed services default to, and durable.
const pg0 = await startLocalPostgres({
  dataDir,
  persistent: false,
  durable: true,
  locale: 'icu-en-US',
});
const started = Date.now();
const stamp = new Date().toISOString().replace(/[:.]/g, '-');
const outDir = path.join(root, 'bench', 'results');
await mkdir(outDir, { recursive: true });

/** The settings that make the database production-like, read back from the server, not assumed. */
async function databaseSettings() {
  const c = new pg.Client(pg0.url);
  await c.connect();
  try {
    const {
      rows: [db],
    } = await c.query(
      'SELECT datlocprovider, datcollate, datlocale FROM pg_database WHERE datname = current_database()',
    );
    const {
      rows: [s],
    } = await c.query(
      "SELECT current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS synchronous_commit, current_setting('server_version') AS version",
    );
    if (
      db.datlocprovider !== 'i' ||
      db.datlocale !== 'en-US' ||
      s.fsync !== 'on' ||
      s.synchronous_commit !== 'on'
    ) {
      throw new Error(
        `the database is not the production-like one asked for: ${JSON.stringify({ ...db, ...s })}`,
      );
    }
    return {
      provider: 'icu',
      collation: db.datlocale,
      libcLocale: db.datcollate,
      fsync: s.fsync,
      synchronousCommit: s.synchronous_commit,
      version: s.version,
    };
  } finally {
    await c.end();
  }
}

let exitCode = 0;
/** @type {Awaited<ReturnType<typeof startPgBouncer>> | undefined} */
let pooler;
try {
  const settings = await databaseSettings();
  await migrate(pg0.url);
  const naiveUrl = await createNaiveDatabase(pg0.url);
  const pgPid = await postmasterPid(pg0.dataDir);
  const sluiceTable = await openTable(pg0.url);
  const naiveTable = await openTable(naiveUrl);
  const machine = `${os.cpus().length} × ${os.cpus()[0]?.model.trim()}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, PostgreSQL ${settings.version.split(' ')[0]} (embedded; ICU ${settings.collation} default collation; fsync and synchronous commit on)`;
  say(
    `PostgreSQL on 127.0.0.1:${pg0.port}, ${settings.provider} ${settings.collation}; results in ${path.relative(root, outDir)}`,
  );

  /** @param {Record<string, string>} env @param {string} [script]  another checkout's server.js (--compare) */
  const startSluice = (env, script) => () =>
    startServerProcess(
      { DATABASE_URL: pg0.url, DB_POOL_MAX: String(POOL), ...env },
      { script, nodeArgs: PROFILE_ARGS },
    );
  const startNaive = () => startServerProcess({ DATABASE_URL: naiveUrl }, { script: NAIVE_SERVER });
  const startNoop = () => startServerProcess({}, { script: NOOP_SERVER });
  /** @type {Record<string, unknown>} */
  const json = { machine, database: settings, pool: POOL, started: stamp };
  let report = '';
  /** @type {string[]} */
  const failedK6 = [];

  if (runReference) {
    /** @param {string} name @param {string} script @param {Record<string, string>} [serviceEnv] */
    const reference = async (name, script, serviceEnv = {}) => {
      say(`reference ${name}: k6 run k6/${script}`);
      const r = await measureRun({
        k6,
        script: path.join(root, 'k6', script),
        k6Env: {},
        summaryFile: path.join(outDir, `${stamp}-${name.replace(/\W+/g, '-')}-k6.json`),
        start: startSluice(serviceEnv),
        pgPid,
        table: sluiceTable,
      });
      if (r.k6ExitCode !== 0) failedK6.push(name);
      return { name, ...r };
    };
    const rows = [
      await reference('one', 'stress-test-one.js'),
      await reference('batch', 'stress-test-batch.js'),
    ];
    if (opts.strategies) {
      for (const strategy of ['unnest', 'copy'])
        rows.push(
          await reference(`batch (${strategy})`, 'stress-test-batch.js', {
            INSERT_STRATEGY: strategy,
          }),
        );
    }
    const batch = /** @type {typeof rows[number]} */ (rows.find((r) => r.name === 'batch'));
    say(`ceiling: COPY ${batch.items} rows over ${POOL} connections`);
    const db0 = await postgresCpuSeconds(pgPid);
    const copy = await measureCopyCeiling(pg0.url, {
      rows: batch.items,
      concurrency: POOL,
      tag: stamp,
    });
    const ceiling = {
      name: 'COPY ceiling',
      items: copy.items,
      seconds: copy.seconds,
      itemsPerSec: copy.items / copy.seconds,
      dbCpuSeconds: (await postgresCpuSeconds(pgPid)) - db0,
    };
    const all = [...rows, ceiling];
    const ratio = batch.itemsPerSec / rows[0].itemsPerSec;
    report += `## Reference profiles (k6's defaults, 1 s sleeps)\n\n${markdownTable(all, ceiling.itemsPerSec)}\n\nbatch/one: ${ratio.toFixed(1)}×; batch is ${((batch.itemsPerSec / ceiling.itemsPerSec) * 100).toFixed(1)}% of the COPY ceiling.\n\n`;
    json.reference = all;
    await writeFile(
      path.join(outDir, `${stamp}.svg`),
      svgChart(all, `sluice, ${stamp.slice(0, 10)}: ${machine}`),
    );
  }

  if (runCapacity) {
    // The tracing variant exports to a receiver here that reads and drops what it gets.
    const traced = (/** @type {string} */ variant) =>
      VARIANTS[baseVariant(variant)].OTEL_TRACES_EXPORTER !== undefined;
    const receiver = variants.some(traced) ? await startOtlpReceiver({ discard: true }) : undefined;
    // The pooled variant goes through PgBouncer in transaction mode, its pool the service's size.
    const pooled = (/** @type {string} */ variant) =>
      VARIANTS[baseVariant(variant)].DATABASE_URL === THROUGH_POOLER;
    pooler = variants.some(pooled)
      ? await startPgBouncer({ upstreamUrl: pg0.url, poolSize: POOL })
      : undefined;
    if (pooler) say(`PgBouncer (transaction pooling, pool of ${POOL}) on 127.0.0.1:${pooler.port}`);
    /** @param {string} variant */
    const envOf = (variant) => {
      const env = VARIANTS[baseVariant(variant)];
      if (traced(variant)) return { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: receiver?.endpoint ?? '' };
      if (pooled(variant)) return { ...env, DATABASE_URL: pooler?.url ?? '' };
      return env;
    };
    /** @param {string} variant */
    const scriptOf = (variant) =>
      variant.endsWith(COMPARED) ? path.resolve(/** @type {string} */ (COMPARE_SERVER)) : undefined;
    const plan = planRuns(loads, variants, rounds);
    say(
      `capacity: ${plan.length} runs of ${opts.duration} (loads ${loads.map((l) => l.id).join(', ')}; variants ${variants.join(', ')}; ${rounds} rounds)`,
    );
    const runs = [];
    for (const [i, p] of plan.entries()) {
      const name = `${p.load.id} ${p.variant} #${p.round + 1}`;
      say(`capacity ${i + 1}/${plan.length}: ${name}`);
      const r = await measureRun({
        k6,
        script: path.join(root, 'k6', p.load.script),
        // The credentials variants' TOKEN (a static token or a JWT); the references need none.
        k6Env: {
          MODE: 'capacity',
          VUS: String(p.load.vus),
          DURATION: opts.duration,
          ...p.load.env,
          ...(p.target === 'sluice' ? await credentialsFor(baseVariant(p.variant)) : {}),
        },
        summaryFile: path.join(outDir, `${stamp}-capacity-${i}-k6.json`),
        start:
          p.target === 'naive'
            ? startNaive
            : p.target === 'noop'
              ? startNoop
              : startSluice(envOf(p.variant), scriptOf(p.variant)),
        pgPid,
        // The no-op endpoint writes nothing: its users are what k6 counted.
        table: p.target === 'naive' ? naiveTable : p.target === 'noop' ? undefined : sluiceTable,
        poolerPid: p.target === 'sluice' && pooled(p.variant) ? pooler?.pid() : undefined,
      });
      if (r.k6ExitCode !== 0) failedK6.push(name);
      if (r.rows !== undefined && r.rows !== r.k6Items)
        say(`  ${name}: k6 counted ${r.k6Items} inserted, the table holds ${r.rows}`);
      runs.push({
        load: p.load.id,
        variant: p.variant,
        round: p.round,
        env: p.target === 'sluice' ? VARIANTS[baseVariant(p.variant)] : {},
        ...r,
        usersPerSec: r.itemsPerSec,
      });
    }
    await receiver?.close();
    const lines = summarise(runs);
    report += `## Capacity (closed loop, no sleep, ${opts.duration} a run, ${rounds} rounds; sluice/naive per round, median quoted)\n\n${capacityTable(lines)}\n\n${againstTable(lines) ? `### Loads against loads (the same variant, the same round; medians of the rounds' ratios)\n\n${againstTable(lines)}\n\n` : ''}### Every run\n\n${runsTable(runs)}\n\n`;
    json.capacity = {
      duration: opts.duration,
      rounds,
      variants: Object.fromEntries(variants.map((v) => [v, VARIANTS[baseVariant(v)]])),
      compare: COMPARE_SERVER,
      summary: lines,
      runs,
    };
    await writeFile(
      path.join(outDir, `${stamp}-capacity.svg`),
      ratioChart(
        lines,
        `${stamp.slice(0, 10)}, ${os.cpus().length} cores, PostgreSQL ${settings.version.split(' ')[0]} with ICU ${settings.collation}, fsync on; closed loop, ${rounds} × ${opts.duration} a variant`,
      ),
    );
  }

  const minutes = (Date.now() - started) / 60_000;
  report += `Machine: ${machine}. Took ${minutes.toFixed(1)} min.\n`;
  json.minutes = minutes;
  await writeFile(path.join(outDir, `${stamp}.json`), JSON.stringify(json, null, 2));
  await writeFile(path.join(outDir, `${stamp}.md`), report);
  if (opts.publish) {
    await mkdir(path.join(root, 'docs'), { recursive: true });
    if (runReference)
      await copyFile(path.join(outDir, `${stamp}.svg`), path.join(root, 'docs', 'bench.svg'));
    if (runCapacity)
      await copyFile(
        path.join(outDir, `${stamp}-capacity.svg`),
        path.join(root, 'docs', 'bench-capacity.svg'),
      );
  }
  console.log(`\n${report}`);
  say(`report: ${path.relative(root, path.join(outDir, `${stamp}.md`))}`);
  if (failedK6.length) say(`k6 thresholds failed for: ${failedK6.join(', ')}`);
  exitCode = failedK6.length ? 1 : 0;
  await Promise.all([sluiceTable.close(), naiveTable.close()]);
} finally {
  await pooler?.stop();
  await pg0.stop();
  await rm(path.dirname(dataDir), { recursive: true, force: true });
}
process.exitCode = exitCode;
