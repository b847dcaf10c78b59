#!/usr/bin/env node
// `npm test`: starts what the tests need (a throwaway PostgreSQL unless DATABASE_URL is given),
// then runs every *.test.js with node:test. Each test file creates and drops its own database.
import { spawn } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** @param {string} msg */
const say = (msg) => console.error(`[test] ${msg}`);

const TEST_DIRS = ['db/test', 'service/test', 'lambda/test', 'k6/test', 'bench/test', 'test'];

/** @param {string} dir @returns {Promise<string[]>} */
async function findTests(dir) {
  const entries = await readdir(path.join(root, dir), { withFileTypes: true, recursive: true }).catch(() => []);
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.test.js'))
    .map((e) => path.relative(root, path.join(e.parentPath ?? e.path, e.name)));
}

const only = process.argv.slice(2);
const files = only.length ? only : (await Promise.all(TEST_DIRS.map(findTests))).flat().sort();
if (files.length === 0) {
  say('no test files found');
  process.exit(1);
}

let adminUrl = process.env.DATABASE_URL;
/** @type {import('@sluice/db/local-postgres').LocalPostgres | undefined} */
let localPostgres;
if (adminUrl) {
  say('using DATABASE_URL as given: each test file creates and drops a database of its own there');
} else {
  const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
  localPostgres = await startLocalPostgres({ dataDir: await tempDataDir('sluice-test-'), persistent: false });
  adminUrl = localPostgres.url;
  say(`throwaway PostgreSQL on 127.0.0.1:${localPostgres.port}`);
}

// The SQS emulator for the queue-path tests; each test file creates queues of its own in it.
let sqsEndpoint = process.env.SQS_ENDPOINT;
/** @type {{ stop: () => Promise<void> } | undefined} */
let elasticmq;
if (!sqsEndpoint) {
  const [{ startElasticMQ }, { freePort }] = await Promise.all([import('@sluice/lambda/elasticmq'), import('@sluice/db/local-postgres')]);
  elasticmq = await startElasticMQ({ port: await freePort(), queues: [], log: say });
  sqsEndpoint = /** @type {any} */ (elasticmq).endpoint;
  say(`ElasticMQ on ${sqsEndpoint}`);
}

const started = Date.now();
const runner = spawn(process.execPath, ['--test', '--test-reporter=spec', ...files], {
  cwd: root,
  env: { ...process.env, SLUICE_TEST_ADMIN_URL: adminUrl, SLUICE_TEST_SQS_ENDPOINT: sqsEndpoint },
  stdio: 'inherit',
});
const stopAll = () => runner.kill('SIGTERM');
process.on('SIGINT', stopAll);
process.on('SIGTERM', stopAll);

const code = await new Promise((resolve) => runner.on('exit', (c, s) => resolve(c ?? (s ? 1 : 0))));
say(`tests took ${((Date.now() - started) / 1000).toFixed(1)} s`);
await Promise.all([localPostgres?.stop(), elasticmq?.stop()]);
process.exit(code);
