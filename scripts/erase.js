// `npm run erase -- EMAIL... | --file F`: erases users as POST /erasures does (users/erase.js), on
// the database itself: each one's row, the items set aside and the stored answers that name them,
// and a tombstone against replays, a transaction a batch. It prints counts, never an email.
import { DATABASE_VARIABLES } from '@sluice/db/database-url';
import { createCommand } from '@sluice/db/command-line';
import { environmentHelp } from '@sluice/env';
import { ERASURE_KEY_VARIABLES } from './command-erasure-key.js';
import { EMBEDDED_DIR_VARIABLES } from './embedded-database.js';

const program = createCommand(
  'npm run erase --',
  'Erases users everywhere sluice keeps them (their row, the items set aside that name ' +
    'them, their data in stored Idempotency-Key answers) and records a tombstone for each ' +
    'email, stored or not, so that no replay brings it back: a later write is stored only ' +
    "when its changedAt is newer than the erasure's. The emails come from the arguments or " +
    'from --file, all checked before anything is erased; they are erased 10,000 a ' +
    'transaction (progress on stderr), then the counts are printed: never an email. Reads ' +
    'DATABASE_URL, else the PG* variables, else the embedded PostgreSQL of a running npm ' +
    'start (found on EMBEDDED_PG_DIR), and the erasure key the service has: ERASURE_KEY or ' +
    'ERASURE_KEY_FILE, else, on the embedded PostgreSQL, the key npm start keeps beside ' +
    'its data. Exit 0 when done, 1 on a failure (the batches before it stay erased; running ' +
    'the command again is safe), 2 on bad input or configuration (nothing erased).',
  environmentHelp({ ...DATABASE_VARIABLES, ...EMBEDDED_DIR_VARIABLES, ...ERASURE_KEY_VARIABLES }),
)
  .argument('[emails...]', 'the emails to erase')
  .option(
    '--file <file>',
    'read the emails from this file instead, one a line (blank lines and lines ' +
      'starting with # are skipped; - reads stdin)',
  )
  .option(
    '--dry-run',
    'count what would be erased (the emails stored, the emails absent), changing nothing',
  )
  .option(
    '--changed-at <time>',
    "when the erasure happened at its source (RFC 3339 with an offset, as a user's " +
      'changedAt): a later write of one of the emails is stored only when newer (default: now)',
  )
  .parse();

/** @type {{ file?: string, dryRun?: boolean, changedAt?: string }} */
const options = program.opts();
/** @type {string[]} */
const emails = program.args;
if (emails.length > 0 && options.file !== undefined)
  program.error('error: give emails or --file, not both');
if (emails.length === 0 && options.file === undefined)
  program.error('error: give the emails to erase, or --file');

if (options.changedAt !== undefined) await checkChangedAt(options.changedAt);

const { runErase } = await import('./erase-run.js');
process.exitCode = await runErase({ emails, ...options });

/**
 * --changed-at, checked by an erasure's own rule for changedAt, on an item that has nothing else
 * wrong: a bad one is a usage error.
 * @param {string} changedAt
 */
async function checkChangedAt(changedAt) {
  const { InvalidBatchError } = await import('../service/src/errors.js');
  const { checkErasures } = await import('../service/src/users/erasure-items.js');
  try {
    checkErasures([{ email: 'changed-at@example.com', changedAt }]);
  } catch (err) {
    if (!(err instanceof InvalidBatchError)) throw err;
    program.error(`error: option '--changed-at <time>' ${err.errors[0].message}`);
  }
}
