// Every value the validator accepts is stored exactly as sent (emails lower-cased) by
// every strategy, with group commit on and off, and every other value is refused with a 400 naming
// the item and the field. Properties over users generated from the whole of Unicode
// (test/support/fuzz-users.js), sent over HTTP to the real service and read back from PostgreSQL,
// on the C-locale cluster of `npm test` and on an ICU en-US one of this file's own (what the
// benchmarks and managed services use). A bounded run: a fixed seed and a random one per variant;
// `npm run fuzz` runs the same properties for as long as it is asked. Streamed bodies (NDJSON and
// CSV) go through the same validator and a writer of their own: the same property holds
// for them, with each error naming the user's line, under the default write variant.
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import fc from 'fast-check';
import { startLocalPostgres, tempDataDir } from '@sluice/db/local-postgres';
import { startTestApp } from '../../../test/support/app.js';
import { adminUrl, createTestDatabase } from '../../../test/support/database.js';
import { REGRESSIONS } from '../../../test/support/fuzz-regressions.js';
import { everyFlawInEveryField } from '../../../test/support/fuzz-users.js';
import {
  FUZZ_APP_ENV,
  runCase,
  storedAsSentProperty,
} from '../../../test/support/stored-as-sent.js';
import { WRITE_VARIANTS } from '../../../test/support/write-variants.js';

const FIXED_SEED = 14;
const RANDOM_SEED = Math.floor(Math.random() * 2 ** 31);
// Cases per seed, variant and locale: 6 variants × 2 locales × 2 seeds × RUNS in all.
const RUNS = 12;
// Far more than the runs take (about a second): a bound on shrinking, which is slow when each
// attempt is (a validator that backtracks); the best counterexample so far is reported.
const TIME_LIMIT_MS = 120_000;

for (const locale of /** @type {const} */ (['c', 'icu-en-US'])) {
  describe(`stored as sent, or refused naming the field (locale ${locale})`, () => {
    /** @type {Awaited<ReturnType<typeof startLocalPostgres>> | undefined} */
    let cluster;
    /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */
    let db;
    before(async () => {
      if (locale !== 'c')
        cluster = await startLocalPostgres({
          dataDir: await tempDataDir('sluice-fuzz-'),
          persistent: false,
          locale,
        });
      db = await createTestDatabase({ serverUrl: cluster?.url ?? adminUrl() });
    });
    after(async () => {
      await db?.drop();
      if (cluster) {
        await cluster.stop();
        await rm(path.dirname(cluster.dataDir), { recursive: true, force: true });
      }
    });

    for (const [v, { label, env }] of WRITE_VARIANTS.entries()) {
      // A stream has one writer whatever the variant: the first variant sends the streamed formats too.
      const formats =
        /** @type {import('../../../test/support/stored-as-sent.js').BodyFormat[]} */ (
          v === 0 ? ['json', 'ndjson', 'csv'] : ['json']
        );
      describe(label, () => {
        /** @type {Awaited<ReturnType<typeof startTestApp>>} */
        let app;
        before(async () => {
          app = await startTestApp({ databaseUrl: db.url, env: { ...env, ...FUZZ_APP_ENV } });
        });
        after(() => app?.close());

        for (const format of formats) {
          const as = format === 'json' ? '' : ` (${format} body)`;
          test(`every control character, lone surrogate, quote, odd digit and letter, in every field${as}`, () =>
            runCase({ app, db }, everyFlawInEveryField(), undefined, format));
          for (const regression of REGRESSIONS) {
            test(`regression: ${regression.title}${as}`, () =>
              runCase({ app, db }, regression.requests, undefined, format));
          }
          for (const seed of [FIXED_SEED, RANDOM_SEED]) {
            test(`${RUNS} generated cases, seed ${seed}${seed === RANDOM_SEED ? ' (random)' : ''}${as}`, () =>
              fc.assert(storedAsSentProperty({ app, db }, undefined, format), {
                seed,
                numRuns: RUNS,
                includeErrorInReport: true,
                plugins: [fc.interruptAfterTimeLimit(TIME_LIMIT_MS, { failOnInterrupt: true })],
              }));
          }
        }
      });
    }
  });
}
