// `npm run quarantine -- list|export|purge`: the items `Prefer: invalid=quarantine` set aside
// (quarantined_items, migration 0006), read and purged on DATABASE_URL (or the PG* variables).
import { environmentHelp } from '@sluice/env';
import { DATABASE_VARIABLES } from '@sluice/db/database-url';
import { InvalidArgumentError, createCommand } from '@sluice/db/command-line';
import { runStatement } from '../service/src/db/statement.js';
import { EMBEDDED_DIR_VARIABLES } from './embedded-database.js';

/** `7d`, `12h`, `30m` ago, or an ISO 8601 date or time: an instant. @param {string} value */
function instant(value) {
  const ago = /^([0-9]{1,6})([dhm])$/.exec(value);
  if (ago)
    return new Date(
      Date.now() -
        Number(ago[1]) *
          { d: 86_400_000, h: 3_600_000, m: 60_000 }[/** @type {'d' | 'h' | 'm'} */ (ago[2])],
    );
  const at = /^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9:.]+(Z|[+-][0-9]{2}:?[0-9]{2})?)?$/.test(value)
    ? new Date(value)
    : undefined;
  if (!at || Number.isNaN(at.getTime()))
    throw new InvalidArgumentError(
      'Expected a time ago (7d, 12h, 30m) or an ISO 8601 ' +
        'date or time (2026-11-28, 2026-11-28T09:30:00Z).',
    );
  return at;
}

const FILTERS = 'Filters: --client, --request, --since, --until; several are all applied.';
const program = createCommand(
  'npm run quarantine --',
  'The items that POST /users set aside with Prefer: invalid=quarantine (the table ' +
    'quarantined_items): count them, export them to fix and send again, purge them. ' +
    'Reads DATABASE_URL, else the PG* variables, else the embedded PostgreSQL of a running ' +
    'npm start (found on EMBEDDED_PG_DIR, whatever its port). On AWS, run it as a one-off ' +
    "task of the service's task definition, or use the SQL in docs/operations.md with psql.",
  environmentHelp({ ...DATABASE_VARIABLES, ...EMBEDDED_DIR_VARIABLES }),
);

/** @param {import('commander').Command} command */
const withFilters = (command) =>
  command
    .option(
      '--client <name>',
      "only the items of this client: a credential's name (every kind), or one scope " +
        'as list prints it (token:NAME, jwt:SUBJECT, anonymous: sent without credentials)',
    )
    .option('--request <id>', 'only the items of this request (its Quarantine-Request-Id)')
    .option(
      '--since <time>',
      'only items kept at or after this time (7d, 12h, 30m ago, or an ISO 8601 date or time)',
      instant,
    )
    .option('--until <time>', 'only items kept before this time (as --since)', instant);

withFilters(
  program
    .command('list')
    .description(
      `Counts the items by day (UTC), client and reason, newest ` +
        `day first, one tab-separated line each. ${FILTERS}`,
    ),
).action((options) => run((db) => list(db, options)));
withFilters(
  program
    .command('export')
    .description(
      'Prints the items as NDJSON on stdout (or --output FILE), oldest first: a ' +
        'line an item, with its client, request, time, format, position (index from ' +
        '0; line from 1 in a streamed body), reason and errors, and the item as sent ' +
        "(its JSON, or its text when it was not JSON; a plaintext password's value " +
        'was replaced before it was kept). With --items, only the items, one a ' +
        'line, so that the file, once fixed, can be sent again with npm run import. ' +
        FILTERS,
    ),
)
  .option(
    '--items',
    'print only the items (a CSV record as a JSON object of its ' +
      "header's columns), to fix and send again with npm run import",
  )
  .option(
    '--output <file>',
    'write the export to this file, not stdout: `npm run` prints its own lines on stdout, ' +
      'so `npm run quarantine -- export > file` would hold them too (or use `npm run -s`)',
  )
  .action((options) =>
    run((db) => toOutput(options.output, (out) => exportItems(db, options, out))),
  );
program
  .command('purge')
  .description(
    'Deletes items: those kept before --older-than, or those of --request ' +
      "(with --client, only that client's). Prints how many were deleted.",
  )
  .option(
    '--older-than <time>',
    'delete the items kept before this time (7d, 12h, 30m ago, or an ISO 8601 date or time)',
    instant,
  )
  .option('--request <id>', 'delete the items of this request (its Quarantine-Request-Id)')
  .option('--client <name>', "only this client's items")
  .action((options, command) => {
    if (!options.olderThan && !options.request)
      command.error(
        'error: purge needs --older-than or --request (nothing is deleted without one)',
      );
    return run((db) => purge(db, options));
  });
program.parse();

/** @typedef {import('../service/src/users/quarantine-types.js').ItemFilters} Filters */

/** Rows an export reads at once. */
const PAGE = 1000;

/** The table's statements (service/src/users/quarantine-sql.js), loaded once a command runs. */
const statements = () => import('../service/src/users/quarantine-sql.js');

/**
 * Opens the database, runs `fn`, closes; a failure is one line, exit 1.
 * @param {(db: import('pg').Client) => Promise<void>} fn
 */
async function run(fn) {
  const { databaseUrlFromEnv } = await import('@sluice/db/database-url');
  let url;
  try {
    url = databaseUrlFromEnv(process.env);
  } catch (err) {
    console.error(`bad configuration: ${err instanceof Error ? err.message : err}`);
    process.exit(2);
  }
  if (!url) {
    const { runningEmbeddedDatabase } = await import('./embedded-database.js');
    const embedded = await runningEmbeddedDatabase(process.env);
    if ('problem' in embedded) {
      console.error(
        `neither DATABASE_URL nor PGHOST is set, and ${embedded.problem}: ` +
          `start it (npm start), or say which database holds the quarantine.`,
      );
      process.exit(2);
    }
    url = embedded.url;
  }
  const { default: pg } = await import('pg');
  const db = new pg.Client({ connectionString: url, application_name: 'sluice-quarantine' });
  try {
    await db.connect();
    await fn(db);
  } catch (err) {
    console.error(`quarantine: ${err instanceof Error ? err.message : err}`);
    process.exitCode = 1;
  } finally {
    await db.end().catch(() => {});
  }
}

/** @param {import('pg').Client} db @param {Filters} filters */
async function list(db, filters) {
  const { countItems } = await statements();
  const rows = await runStatement(db, countItems(filters));
  await write(
    `day\tclient\treason\titems\n` +
      `${rows.map((r) => `${r.day}\t${r.client}\t${r.reason}\t${r.items}\n`).join('')}`,
  );
}

/**
 * Runs `fn` with a writer to `file`, or to stdout without one; a file is written whole or not at
 * all (a temporary file renamed at the end), so a failed export never leaves a file to send again.
 * @param {string | undefined} file
 * @param {(out: (text: string) => Promise<unknown>) => Promise<number>} fn
 */
async function toOutput(file, fn) {
  if (file === undefined) return void (await fn(write));
  const { open, rename, rm } = await import('node:fs/promises');
  const partial = `${file}.partial`;
  const handle = await open(partial, 'w');
  try {
    const items = await fn((text) => handle.write(text));
    await handle.close();
    await rename(partial, file);
    console.error(`exported ${items} item${items === 1 ? '' : 's'} to ${file}`);
  } catch (err) {
    await handle.close().catch(() => {});
    await rm(partial, { force: true });
    throw err;
  }
}

/**
 * @param {import('pg').Client} db @param {Filters & { items?: boolean }} options
 * @param {(text: string) => Promise<unknown>} out @returns {Promise<number>}  the items written
 */
async function exportItems(db, options, out) {
  let count = 0;
  const { createCsvParser } = await import('../service/src/users/stream-parse.js');
  const { itemPage } = await statements();
  /**
   * A page of at most PAGE rows after `id` (keyset: memory bounded however many there are).
   * @param {string} after
   */
  const page = (after) => runStatement(db, itemPage(options, after, PAGE));
  /**
   * The item as JSON when it is, a CSV record as an object of its header's columns, else its text.
   * @param {import('../service/src/users/quarantine-types.js').KeptRow} row
   */
  const itemOf = (row) => {
    if (row.format === 'csv') {
      let user;
      const parser = createCsvParser({ onUnreadable: () => {} });
      try {
        parser.feed(`${row.csvHeader}\n${row.item}\n`, (item) => (user = item));
        parser.end((item) => (user = item));
      } catch {
        return row.item;
      }
      return user ?? row.item;
    }
    try {
      return JSON.parse(row.item);
    } catch {
      return row.item;
    }
  };
  for (let rows = await page('0'); rows.length > 0; rows = await page(rows[rows.length - 1].id)) {
    const lines = rows.map((row) => {
      const item = itemOf(row);
      if (options.items) return typeof item === 'string' ? item : JSON.stringify(item);
      return JSON.stringify({
        id: Number(row.id),
        client: row.client,
        clientScope: row.clientScope,
        requestId: row.requestId,
        clientRequestId: row.clientRequestId,
        truncated: row.truncated,
        receivedAt: row.receivedAt.toISOString(),
        format: row.format,
        position: row.position,
        line: row.line,
        reason: row.reason,
        errors: row.errors,
        item,
      });
    });
    await out(`${lines.join('\n')}\n`);
    count += lines.length;
  }
  return count;
}

/**
 * @param {import('pg').Client} db
 * @param {{ olderThan?: Date, request?: string, client?: string }} options
 */
async function purge(db, options) {
  const { deleteItems } = await statements();
  const rowCount = await runStatement(db, deleteItems(options));
  console.log(`purged ${rowCount} item${rowCount === 1 ? '' : 's'}`);
}

/** stdout, waiting when it is full (a pipe to a slow reader). @param {string} text */
function write(text) {
  return new Promise((resolve) =>
    process.stdout.write(text)
      ? resolve(undefined)
      : process.stdout.once('drain', () => resolve(undefined)),
  );
}
