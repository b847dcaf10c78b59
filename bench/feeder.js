#!/usr/bin/env node
// `npm run bench:feeder`: the feeder's drain rate end to end, next to the direct POST /users rate.
import { mkdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Option, createCommand, wholeNumber } from '@sluice/db/command-line';

const opts = createCommand(
  'npm run bench:feeder --',
  'Users per second drained end to end (queue → local runner → handler → service → table) with 1 and with 100 users per message, next to the direct POST /users rate, on one machine: a fresh PostgreSQL, the service as its own process, ElasticMQ. Each queue is filled first; only the drain is timed. A report lands in bench/results/.',
)
  .addOption(
    new Option(
      '--users <n>',
      'users in the direct run and in the 100-per-message drain; the 1-per-message drain takes at most 20000',
    )
      .env('USERS')
      .argParser(wholeNumber(1))
      .default(100_000),
  )
  .parse()
  .opts();
const USERS = /** @type {number} */ (opts.users);

const { markdownTable } = await import('markdown-table');
const { default: pg } = await import('pg');
const { freePort, startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
const { migrate } = await import('@sluice/db/migrate');
const { startElasticMQ } = await import('@sluice/lambda/elasticmq');
const { SQSClient } = await import('@aws-sdk/client-sqs');
const { createQueuePair, waitUntil } = await import('../lambda/test/support/queues.js');
const { LocalEventSource } = await import('../lambda/local/local-runner.js');
const { packMessages, sendMessages } = await import('../lambda/local/producer.js');
const { startServerProcess } = await import('../test/support/server-process.js');

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const RUNNER = { batchSize: 1000, batchWindowMs: 1000, receivers: 8, concurrency: 2 };
const POST_CONCURRENCY = 4;
/** @param {string} m */
const say = (m) => console.error(`[bench:feeder] ${m}`);

const pgServer = await startLocalPostgres({
  dataDir: await tempDataDir('sluice-bench-feeder-'),
  persistent: false,
  durable: true,
});
await migrate(pgServer.url);
const service = await startServerProcess({ DATABASE_URL: pgServer.url });
const sqsServer = await startElasticMQ({ port: await freePort(), queues: [], log: say });
const sqs = new SQSClient({
  endpoint: sqsServer.endpoint,
  region: 'us-east-1',
  credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
});
const db = new pg.Pool({ connectionString: pgServer.url, max: 2 });
const countUsers = async () => (await db.query('SELECT count(*)::int AS n FROM users')).rows[0].n;

/** @param {string} tag @param {number} n */
function* users(tag, n) {
  for (let i = 0; i < n; i++) yield { email: `${tag}-${i}@bench.test`, name: `Bench ${i}` };
}

/** The direct rate: 1000-user POSTs at the feeder's total request concurrency. */
async function direct() {
  const all = [...users('direct', USERS)];
  const started = Date.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: RUNNER.concurrency * POST_CONCURRENCY }, async () => {
      while (next < all.length) {
        const chunk = all.slice(next, (next += 1000));
        const res = await fetch(`${service.baseUrl}/users`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(chunk),
        });
        if (res.status !== 201) throw new Error(`direct POST answered ${res.status}`);
      }
    }),
  );
  return {
    name: 'direct POST /users (1000 per request)',
    users: USERS,
    seconds: (Date.now() - started) / 1000,
  };
}

/** @param {number} perMessage @param {number} n */
async function drain(perMessage, n) {
  const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 660, maxReceiveCount: 5 });
  say(`filling a queue with ${n} users, ${perMessage} per message`);
  await sendMessages({
    sqs,
    queueUrl: queues.queueUrl,
    messages: packMessages(users(`q${perMessage}`, n), perMessage),
    concurrency: 16,
  });
  const before = await countUsers();
  // The handler's per-invocation log and EMF lines would drown the report; Powertools' own switches mute them.
  Object.assign(process.env, {
    SERVICE_URL: service.baseUrl,
    POST_CONCURRENCY: String(POST_CONCURRENCY),
    POWERTOOLS_LOG_LEVEL: 'SILENT',
    POWERTOOLS_METRICS_DISABLED: 'true',
  });
  const { handler } = await import('../lambda/src/handler.js');
  const log = console.log;
  console.log = () => {};
  const runner = new LocalEventSource({
    sqs,
    queueUrl: queues.queueUrl,
    handler,
    region: 'us-east-1',
    functionTimeoutMs: 60_000,
    waitTimeSeconds: 1,
    log: () => {},
    ...RUNNER,
  });
  const started = Date.now();
  await runner.start();
  await waitUntil(
    async () => (await countUsers()) - before >= n && (await queues.depth(queues.queueUrl)) === 0,
    'the drain',
    600_000,
    100,
  );
  const seconds = (Date.now() - started) / 1000;
  await runner.stop();
  console.log = log;
  await queues.delete();
  return {
    name: `feeder, ${perMessage} user${perMessage > 1 ? 's' : ''} per message`,
    users: n,
    seconds,
  };
}

try {
  say(`direct: ${USERS} users`);
  const rows = [await direct()];
  // One user per message means one SQS message per user: a tenth as many keep the run short.
  rows.push(await drain(1, Math.min(USERS, 20_000)));
  rows.push(await drain(100, USERS));
  const directRate = rows[0].users / rows[0].seconds;
  const table = markdownTable(
    [
      ['path', 'users', 'seconds', 'users/s', '% of direct'],
      ...rows.map((r) => [
        r.name,
        r.users.toLocaleString('en-US'),
        r.seconds.toFixed(1),
        Math.round(r.users / r.seconds).toLocaleString('en-US'),
        `${((r.users / r.seconds / directRate) * 100).toFixed(0)}%`,
      ]),
    ],
    { align: ['l', 'r', 'r', 'r', 'r'] },
  );
  const machine = `${os.cpus().length} × ${os.cpus()[0]?.model.trim()}, Node ${process.version}, PostgreSQL 17 (fsync on), ElasticMQ`;
  const report = `${table}\n\nRunner: ${JSON.stringify(RUNNER)}, POST_CONCURRENCY ${POST_CONCURRENCY}. Machine: ${machine}.\n`;
  const outDir = path.join(root, 'bench', 'results');
  await mkdir(outDir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  await writeFile(path.join(outDir, `${stamp}-feeder.md`), report);
  await writeFile(
    path.join(outDir, `${stamp}-feeder.json`),
    JSON.stringify({ machine, runner: RUNNER, rows }, null, 2),
  );
  console.log(`\n${report}`);
} finally {
  sqs.destroy();
  await db.end();
  service.child.kill('SIGTERM');
  await service.exited;
  await sqsServer.stop();
  await pgServer.stop();
  await rm(path.dirname(pgServer.dataDir), { recursive: true, force: true });
}
