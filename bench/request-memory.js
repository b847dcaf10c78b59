#!/usr/bin/env node
// `npm run bench:request-memory`: what one large POST /users holds in this process, step by step.
import { Option, createCommand, wholeNumber } from '@sluice/db/command-line';

const opts = createCommand(
  'npm run bench:request-memory --',
  'What one POST /users holds in this process at each step (raw body, decoded string, parsed objects, rows, the SQL of one chunk), in bytes per user: the growth of the heap plus Buffers after a full GC. Runs under node --expose-gc, as the npm script does.',
)
  .addOption(
    new Option('--users <n>', 'users in the request')
      .env('USERS')
      .argParser(wholeNumber(1))
      .default(10_000),
  )
  .parse()
  .opts();
const USERS = /** @type {number} */ (opts.users);

const { makeUsers } = await import('../test/support/users.js');
const { rowsAsArrays, writeStatement } = await import('../service/src/users/user-sql.js');
const { parseUserBatch } = await import('../service/src/users/user-schema.js');

/** The default strategy's statement for an all-new chunk. @param {import('../service/src/users/user-schema.js').UserRow[]} rows */
const buildInsertSql = (rows) => writeStatement(rowsAsArrays(rows), 'fail', 'none');

const CHUNK = 1000;
if (typeof globalThis.gc !== 'function') throw new Error('run with node --expose-gc');
const gc = /** @type {() => void} */ (globalThis.gc);

const held = () => {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
};

/** @type {Record<string, unknown>} what is kept alive while the next step is measured */
const keep = {};
/** @type {{ step: string, bytes: number, bytesPerUser: number }[]} */
const steps = [];
/** @param {string} step @param {() => unknown} make */
function measure(step, make) {
  const before = held();
  keep[step] = make();
  const bytes = held() - before;
  steps.push({ step, bytes, bytesPerUser: Math.round(bytes / USERS) });
}

measure('raw body (Buffer)', () => Buffer.from(JSON.stringify(makeUsers(USERS, 'mem'))));
const raw = /** @type {Buffer} */ (keep['raw body (Buffer)']);
measure('decoded string', () => raw.toString('utf8'));
measure('parsed objects (req.body)', () =>
  JSON.parse(/** @type {string} */ (keep['decoded string'])),
);
measure('rows (parseUserBatch)', () =>
  parseUserBatch(/** @type {unknown[]} */ (keep['parsed objects (req.body)'])),
);
const rows = /** @type {import('../service/src/users/user-schema.js').UserRow[]} */ (
  keep['rows (parseUserBatch)']
);
measure(`SQL of one ${CHUNK}-row chunk`, () => buildInsertSql(rows.slice(0, CHUNK)));
measure(`SQL of one ${CHUNK}-row chunk as sent (Buffer)`, () =>
  Buffer.from(/** @type {string} */ (keep[`SQL of one ${CHUNK}-row chunk`])),
);

console.log(
  `${USERS} users, ${raw.length} bytes of JSON (${Math.round(raw.length / USERS)} bytes per user)\n`,
);
console.log('| held | bytes | bytes per user | × body |');
console.log('| --- | --- | --- | --- |');
for (const s of steps)
  console.log(
    `| ${s.step} | ${s.bytes.toLocaleString('en')} | ${s.bytesPerUser} | ${(s.bytes / raw.length).toFixed(2)} |`,
  );
const all = steps.reduce((n, s) => n + s.bytes, 0);
console.log(
  `| all of them at once | ${all.toLocaleString('en')} | ${Math.round(all / USERS)} | ${(all / raw.length).toFixed(2)} |`,
);
