// `npm run erase` once its command line is read: the database and the key found, the list read and
// checked (a problem with any of them: exit 2, nothing erased), then the erasure or its dry run in
// batches, each batch a transaction of eraseUsers (or a count), and the totals on stdout.
import { setTimeout as sleep } from 'node:timers/promises';
import { databaseUrlFromEnv } from '@sluice/db/database-url';
import { ConfigError } from '@sluice/env';
import { SERVICE_VARIABLES } from '../service/src/config.js';
import { createDatabase } from '../service/src/db/database.js';
import { classifyFailure } from '../service/src/db/failure.js';
import { runStatement } from '../service/src/db/statement.js';
import { lastResult } from '../service/src/db/transaction-settings.js';
import { logSafeError } from '../service/src/log-safe-error.js';
import { createLogger } from '../service/src/logger.js';
import { KEY_COLUMN } from '../service/src/user-columns.js';
import { eraseUsers } from '../service/src/users/erase.js';
import { createErasureGuard } from '../service/src/users/erasure-guard.js';
import { commandErasureKey } from './command-erasure-key.js';
import { runningEmbeddedDatabase } from './embedded-database.js';
import { InvalidListError, checkedErasures, listedEmails } from './erase-list.js';

/** @import { Database } from '../service/src/db/db-types.js' */
/** @import { Erasure } from '../service/src/users/erase.js' */
/** @import { Statement } from '../service/src/db/db-types.js' */

/** Emails a transaction erases: as many as POST /erasures takes in one request by default. */
const BATCH = 10_000;
/** A batch the users table was locked for is tried again this many times, waiting longer each. */
const LOCKED_RETRIES = 4;
const FIRST_WAIT_MS = 500;
/** Connecting may take longer than a request's wait for a pooled connection. */
const CONNECT_TIMEOUT_MS = 10_000;

/** Bad input or configuration, found before anything is erased: exit 2. */
class BadInput extends Error {}

/** @param {string} line */
const say = (line) => console.error(`erase: ${line}`);

/**
 * @param {{ emails: string[], file?: string, dryRun?: boolean, changedAt?: string }} request
 * @returns {Promise<number>}  the exit code
 */
export async function runErase(request) {
  let prepared;
  try {
    prepared = await prepare(request);
  } catch (err) {
    if (!(err instanceof BadInput)) throw err;
    say(err.message);
    return 2;
  }
  const { url, key, erasures, received } = prepared;
  const db = openDatabase(url);
  const done = { count: 0 };
  try {
    const totals = request.dryRun
      ? await countAll(db, erasures, done)
      : await eraseAll({ db, erasures: createErasureGuard({ key }) }, erasures, done);
    console.log(totalsLine({ received, ...totals }, request.dryRun ? erasures.length : undefined));
    return 0;
  } catch (err) {
    const before =
      done.count && !request.dryRun
        ? ` after erasing ${done.count} of ${erasures.length} emails (they stay erased; ` +
          'running the command again is safe)'
        : '';
    say(`failed${before}: ${failureText(err)}`);
    return 1;
  } finally {
    await db.close();
  }
}

/**
 * Everything found and checked before the database is touched.
 * @param {{ emails: string[], file?: string, changedAt?: string }} request
 */
async function prepare({ emails, file, changedAt }) {
  const configured = configuration(() => databaseUrlFromEnv(process.env));
  const url = configured ?? (await embeddedUrl());
  const key = configuration(() => commandErasureKey(process.env, { embedded: !configured }));
  const listed = await listedEmails({ emails, file }).catch((err) => {
    const why = /** @type {NodeJS.ErrnoException} */ (err).code ?? String(err);
    throw new BadInput(`cannot read ${file} (${why}); nothing was erased`);
  });
  let erasures;
  try {
    erasures = checkedErasures(listed, changedAt);
  } catch (err) {
    if (!(err instanceof InvalidListError)) throw err;
    throw new BadInput([err.message, ...err.problems].join('\n  '));
  }
  if (erasures.length === 0) throw new BadInput(`${file} lists no email; nothing was erased`);
  return { url, key, erasures, received: listed.length };
}

/** @template T @param {() => T} read  what throws a ConfigError on bad configuration */
function configuration(read) {
  try {
    return read();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    throw new BadInput(`bad configuration: ${err.message}`);
  }
}

/** The database of a running npm start, found on EMBEDDED_PG_DIR. */
async function embeddedUrl() {
  const embedded = await runningEmbeddedDatabase(process.env);
  if ('url' in embedded) return embedded.url;
  throw new BadInput(
    `neither DATABASE_URL nor PGHOST is set, and ${embedded.problem}: start it ` +
      '(npm start), or say which database to erase from; nothing was erased',
  );
}

/** One connection, under the service's own time limits. @param {string} databaseUrl */
function openDatabase(databaseUrl) {
  const defaultOf = (/** @type {{ default: number }} */ variable) => variable.default;
  return createDatabase(
    {
      databaseUrl,
      dbPoolMax: 1,
      dbConnectTimeoutMs: CONNECT_TIMEOUT_MS,
      dbStatementTimeoutMs: defaultOf(SERVICE_VARIABLES.DB_STATEMENT_TIMEOUT_MS),
      // No longer than the service's own erasures: writers queue behind the lock it waits for.
      dbLockTimeoutMs: defaultOf(SERVICE_VARIABLES.DB_LOCK_TIMEOUT_MS),
    },
    createLogger({ logLevel: 'silent' }),
  );
}

/**
 * @param {{ db: Database, erasures: ReturnType<typeof createErasureGuard> }} deps
 * @param {Erasure[]} items @param {{ count: number }} done  emails gone through so far
 */
async function eraseAll(deps, items, done) {
  const totals = { erased: 0, absent: 0 };
  for (let at = 0; at < items.length; at += BATCH) {
    const batch = items.slice(at, at + BATCH);
    // Without an Idempotency-Key an erasure is always done: never a key taken.
    const result = /** @type {import('../service/src/users/erase.js').Erased} */ (
      await whileLocked(() => eraseUsers(deps, { items: batch }))
    );
    const { erased, absent } = result;
    totals.erased += erased;
    totals.absent += absent;
    done.count += batch.length;
    if (items.length > BATCH) console.error(`erased ${done.count} of ${items.length}`);
  }
  return totals;
}

/**
 * What an erasure would delete: how many of the emails are stored, read only.
 * @param {Database} db @param {Erasure[]} items @param {{ count: number }} done
 */
async function countAll(db, items, done) {
  let stored = 0;
  for (let at = 0; at < items.length; at += BATCH) {
    const emails = items.slice(at, at + BATCH).map((item) => item.email);
    stored += await db.transaction((client) => runStatement(client, countStored(emails)));
    done.count += emails.length;
    if (items.length > BATCH) console.error(`counted ${done.count} of ${items.length}`);
  }
  return { erased: stored, absent: items.length - stored };
}

/**
 * How many of the emails are stored (the lookup eraseUsers deletes by). The one statement of
 * sluice's that scripts/ writes: only the dry run asks it.
 * @param {string[]} emails @returns {Statement<number>}
 */
const countStored = (emails) => ({
  text: `SELECT count(*)::int AS n FROM users
    WHERE ${KEY_COLUMN.column} = ANY($1::text[] COLLATE "C")`,
  values: [emails],
  decode: (answer) => lastResult(answer).rows[0].n,
});

/**
 * `fn`, again after a wait while the users table stays locked (writers hold it) or the connection
 * failed before a commit was sent; never when a commit may have been made.
 * @template T @param {() => Promise<T>} fn @returns {Promise<T>}
 */
async function whileLocked(fn) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const { timeout, transient, inDoubt } = classifyFailure(err);
      const again = (timeout === 'lock_timeout' || transient) && !inDoubt;
      if (!again || attempt === LOCKED_RETRIES) throw err;
      await sleep(FIRST_WAIT_MS * 2 ** attempt);
    }
  }
}

/**
 * @param {{ received: number, erased: number, absent: number }} totals
 * @param {number} [dryRun]  the emails a tombstone would be recorded for, in a dry run
 */
function totalsLine({ received, erased, absent }, dryRun) {
  if (dryRun === undefined) return `received ${received}, erased ${erased}, absent ${absent}`;
  return (
    `received ${received}, would erase ${erased}, absent ${absent} (a dry run: nothing ` +
    `changed; a tombstone would be recorded for each of the ${dryRun} emails)`
  );
}

/**
 * What failed, as a log line may say it (log-safe-error.js: never a value of a row), with what a
 * person does next when that is known.
 * @param {unknown} err
 */
function failureText(err) {
  const { timeout, inDoubt } = classifyFailure(err);
  if (inDoubt)
    return (
      'the connection was lost as a batch was committed: it may be erased ' +
      '(running the command again is safe)'
    );
  if (timeout === 'lock_timeout')
    return 'writers kept the users table locked (lock_timeout): run the command again later';
  /** @type {string[]} */
  const parts = [];
  let e = logSafeError(err);
  while (typeof e === 'object' && e !== null) {
    const { message, code, cause } =
      /** @type {{ message?: string, code?: string, cause?: any }} */ (e);
    if (message || code)
      parts.push(message && code ? `${message} (${code})` : `${message ?? code}`);
    e = cause;
  }
  return parts.join(': ') || 'an unexpected failure';
}
