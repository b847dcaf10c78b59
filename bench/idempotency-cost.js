#!/usr/bin/env node
// `npm run bench:idempotency`: the service + PostgreSQL CPU a request costs with an Idempotency-Key
// and without, side by side in one run: 1000-user batches 8 at a time, and 1-user requests 100 at a
// time (group commit), each user new, each keyed request its own key; alternated, several rounds.
import { randomUUID } from 'node:crypto';
import { createCommand } from '@sluice/db/command-line';

const program = createCommand(
  'npm run bench:idempotency --',
  'Service + PostgreSQL CPU per request with and without an Idempotency-Key, side by side on a throwaway embedded PostgreSQL.',
  {},
)
  .option('--rounds <n>', 'rounds of each load and mode, alternated', '3')
  .option('--seconds <n>', 'about how long each run lasts', '8')
  .option('--only <load>', '1000x8 or 1x100 alone')
  .parse();
const { rounds, seconds } = program.opts();

const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
const { migrate } = await import('@sluice/db/migrate');
const { startServerProcess } = await import('../test/support/server-process.js');
const { postgresCpuSeconds, postmasterPid, processCpuSeconds } =
  await import('./lib/process-stats.js');
const { median } = await import('./lib/stats.js');

const dataDir = await tempDataDir();
const local = await startLocalPostgres({ dataDir, persistent: false });
await migrate(local.url);
const server = await startServerProcess({
  DATABASE_URL: local.url,
  LOG_LEVEL: 'warn',
  DB_POOL_MAX: '10',
});
const pgPid = await postmasterPid(dataDir);
const serverPid = /** @type {number} */ (server.child.pid);

const LOADS = [
  { name: '1000x8', users: 1000, concurrency: 8 },
  { name: '1x100', users: 1, concurrency: 100 },
].filter((l) => !program.opts().only || l.name === program.opts().only);
let serial = 0;
/** @param {number} n */
const usersBody = (n) => {
  const tag = `${process.pid}-${serial++}`;
  return JSON.stringify(
    Array.from({ length: n }, (_, i) => ({
      email: `c-${tag}-${i}@example.com`,
      name: `User ${i}`,
      phone: '+15551234567',
    })),
  );
};

/** One run: `concurrency` loops posting new users for `seconds`; CPU seconds per request of the service and PostgreSQL. @param {typeof LOADS[number]} load @param {boolean} keyed */
async function run({ users, concurrency }, keyed) {
  const serviceBefore = await processCpuSeconds(serverPid);
  const pgBefore = await postgresCpuSeconds(pgPid);
  const until = Date.now() + Number(seconds) * 1000;
  let requests = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < until) {
        const res = await fetch(`${server.baseUrl}/users`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            ...(keyed ? { 'idempotency-key': `"${randomUUID()}"` } : {}),
          },
          body: usersBody(users),
        });
        await res.arrayBuffer();
        if (res.status !== 201) throw new Error(`HTTP ${res.status}`);
        requests++;
      }
    }),
  );
  const service = (await processCpuSeconds(serverPid)) - serviceBefore;
  const pg = (await postgresCpuSeconds(pgPid)) - pgBefore;
  return {
    requests,
    cpuMsPerRequest: ((service + pg) * 1000) / requests,
    serviceMs: (service * 1000) / requests,
    pgMs: (pg * 1000) / requests,
    rps: requests / Number(seconds),
  };
}

try {
  for (const load of LOADS) {
    await run(load, false); // warm-up
    /** @type {Record<string, { cpuMsPerRequest: number, serviceMs: number, pgMs: number, rps: number }[]>} */
    const runs = { without: [], with: [] };
    for (let r = 0; r < Number(rounds); r++) {
      for (const mode of r % 2 === 0 ? ['without', 'with'] : ['with', 'without'])
        runs[mode].push(await run(load, mode === 'with'));
    }
    const cpu = (/** @type {string} */ mode) => median(runs[mode].map((x) => x.cpuMsPerRequest));
    const rps = (/** @type {string} */ mode) => median(runs[mode].map((x) => x.rps));
    const split = (/** @type {string} */ mode) =>
      `service ${median(runs[mode].map((x) => x.serviceMs)).toFixed(3)} + PostgreSQL ${median(runs[mode].map((x) => x.pgMs)).toFixed(3)}`;
    console.log(
      `${load.name}: without ${cpu('without').toFixed(3)} ms CPU/request (${split('without')}; ${rps('without').toFixed(0)} req/s), ` +
        `with ${cpu('with').toFixed(3)} ms (${split('with')}; ${rps('with').toFixed(0)} req/s): ${(cpu('with') / cpu('without')).toFixed(3)}x`,
    );
  }
} finally {
  await server.stop();
  await local.stop();
}
