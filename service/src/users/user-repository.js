import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import copyStreams from 'pg-copy-streams';
import { outcomeInDoubt } from '../db-outcome.js';
import { OutcomeUnknownError, refusalOfDatabaseState } from '../errors.js';
import { createReplayGuess } from './replay-guess.js';
import { lastResult } from '../transaction-settings.js';
import {
  CREATE_STAGING, EMPTY_STAGING, FROM_STAGING, RETURNED_AS_TEXT, ROWS_AS_PARAMETERS, STAGING_TABLE, columnArrays, copySql, insertedUser, mergedUser, rowsAsArrays, rowsAsCsv, timestampAsJson, writeStatement,
} from './user-sql.js';

/** @typedef {import('./user-schema.js').UserRow} UserRow */
/** @typedef {import('./user-schema.js').Resolution} Resolution */
/** @typedef {import('./user-sql.js').OnConflict} OnConflict */
/** @typedef {import('pg').PoolClient} PoolClient */
/** @typedef {import('../transaction-settings.js').TimeLimits} TimeLimits */
/**
 * A row as written, as a representation shows it (return=representation), its keys in the
 * answer's order; the write inserted it when updatedAt is null (else it updated it).
 * @typedef {import('./user-columns.js').WrittenUser} WrittenUser
 */
/**
 * What a write did: its counts, and the rows it wrote when asked for them (withRows), sorted by email.
 * @typedef {{ inserted: number, updated: number, users?: WrittenUser[] }} Counts
 */
/** @typedef {{ withRows?: boolean }} WriteOptions  withRows: answer the rows written too (return=representation) */
/**
 * Writes one chunk; a stored email fails it (23505) when `onConflict` is 'fail'.
 * @typedef {object} ChunkWriter
 * @property {(client: PoolClient, rows: UserRow[], onConflict: OnConflict, settings?: string) => Promise<Counts>} write
 *   settings: the transaction's SET LOCALs to put before the chunk's statement in its query (a single
 *   chunk outside an explicit transaction); none when BEGIN set them
 * @property {boolean} [needsTransaction]  even a single chunk runs in BEGIN/COMMIT: its statement
 *   cannot carry the settings (parameters, COPY)
 * @property {(onConflict: OnConflict) => string} [beginWith]  statements for BEGIN's round trip
 */

const UNIQUE_VIOLATION = '23505';

/**
 * A statement's answer as counts: its command tag when it only inserts, its counts row otherwise
 * (the last statement's, after SET LOCALs).
 * @param {import('pg').QueryResult | import('pg').QueryResult[]} answer @param {OnConflict} onConflict
 * @returns {Counts}
 */
function countsOf(answer, onConflict) {
  const result = lastResult(answer);
  return onConflict === 'merge' ? result.rows[0] : { inserted: result.rowCount ?? 0, updated: 0 };
}
/** @param {OnConflict} onConflict */
const returningFor = (onConflict) => (onConflict === 'merge' ? 'counts' : 'none');

/**
 * One pg-format statement a chunk, each column one array literal (user-sql.js): a single chunk is
 * one query, its settings before it. @type {ChunkWriter}
 */
const formatWriter = {
  write: async (client, rows, onConflict, settings = '') =>
    countsOf(await client.query(settings + writeStatement(rowsAsArrays(rows), onConflict, returningFor(onConflict))), onConflict),
};

/**
 * Four array parameters instead of literals: no quoting, one parse. A statement with parameters
 * goes alone in its query, so the settings come in BEGIN's: even a single chunk is BEGIN, the
 * statement and COMMIT, three round trips where the format strategy makes one.
 * @type {ChunkWriter}
 */
const unnestWriter = {
  needsTransaction: true,
  write: async (client, rows, onConflict) =>
    countsOf(await client.query(writeStatement(ROWS_AS_PARAMETERS, onConflict, returningFor(onConflict)), columnArrays(rows)), onConflict),
};

/**
 * COPY: straight into users when every email must be new; otherwise into a staging table, then
 * INSERT ... SELECT from it with the conflict clause, emptied in the same query for the next chunk.
 * The staging table is the transaction's own (made in BEGIN's round trip, dropped at its end), so
 * this runs in a transaction even for one chunk.
 * @type {ChunkWriter}
 */
const copyWriter = {
  needsTransaction: true,
  beginWith: (onConflict) => (onConflict === 'fail' ? '' : CREATE_STAGING),
  async write(client, rows, onConflict) {
    if (onConflict === 'fail') return { inserted: await copyInto(client, 'users', rows), updated: 0 };
    await copyInto(client, STAGING_TABLE, rows);
    const answer = await client.query(`${writeStatement(FROM_STAGING, onConflict, returningFor(onConflict))}; ${EMPTY_STAGING}`);
    // Two statements, two results: the write's is the first.
    return countsOf(/** @type {import('pg').QueryResult[]} */ (/** @type {unknown} */ (answer))[0], onConflict);
  },
};

/** @param {PoolClient} client @param {string} table @param {UserRow[]} rows */
async function copyInto(client, table, rows) {
  const copy = client.query(copyStreams.from(copySql(table)));
  await pipeline(Readable.from([rowsAsCsv(rows)]), copy);
  return copy.rowCount ?? rows.length;
}

/** How a chunk is written, by INSERT_STRATEGY; its keys are the strategies config.js accepts. */
export const STRATEGIES = /** @type {const} */ ({ format: formatWriter, unnest: unnestWriter, copy: copyWriter });
/** @typedef {keyof typeof STRATEGIES} Strategy */

/** @param {unknown} err */
export const isUniqueViolation = (err) => /** @type {{ code?: string }} */ (err)?.code === UNIQUE_VIOLATION;

/** @param {Resolution} resolution @returns {OnConflict} */
const onConflictFor = (resolution) => (resolution === 'merge' ? 'merge' : 'skip');

/**
 * Writes validated rows all or nothing: one statement per chunk of `chunkRows`; several chunks
 * run in one transaction, a single chunk needs none (one statement is atomic).
 *
 * Resolving conflicts (ON CONFLICT) costs PostgreSQL about a quarter of its insert rate, and
 * almost every batch is new users. So a batch first goes in as all-new; a unique violation rolls
 * that attempt back whole and the batch is written again resolving conflicts. After a replay the
 * next batches resolve conflicts at once for a while (replays come in runs: a retried message, a
 * re-sent file), so a replay-heavy load never pays twice.
 *
 * A write that fails is diagnosed (db.diagnose): the database unavailable is
 * DatabaseUnavailableError (503); a lock or statement timeout is DatabaseTimeoutError (503, not
 * tried again: it would wait as long); a passing failure with the database answering is tried once
 * more; anything else is the request's own failure and is thrown as it is (500). A failure after
 * the write's commit was sent is OutcomeUnknownError (503: it may have been written), and so is
 * any failure of the attempt after one.
 *
 * @param {import('../db.js').Database} db
 * @param {{ chunkRows: number, strategy: Strategy, groupLockTimeoutMs?: number }} options
 *   groupLockTimeoutMs: how long a group's statement waits for a row another writer holds (group
 *   commit splits a group that times out, so one locked email does not hold back the others)
 */
export function createUserWriter(db, { chunkRows, strategy, groupLockTimeoutMs }) {
  const chunkWriter = STRATEGIES[strategy];
  const replays = createReplayGuess();
  const { settings } = db;
  /** @type {TimeLimits | undefined} a group's statement waits briefly for a locked row */
  const groupLimits = groupLockTimeoutMs ? { lockTimeoutMs: groupLockTimeoutMs } : undefined;

  /**
   * One group statement (pg-format, whatever the strategy), its settings (the group's lock timeout)
   * before it in one simple query: one implicit transaction, one round trip. The query answers one
   * result per statement: the write's is the last.
   * @param {UserRow[]} rows @param {OnConflict} onConflict @param {import('./user-sql.js').Returning} returning
   * @returns {Promise<import('pg').QueryResult | import('pg').QueryResult[]>}
   */
  const groupQuery = (rows, onConflict, returning) =>
    db.withClient((client) => {
      const text = settings.statement(writeStatement(rowsAsArrays(rows), onConflict, returning), groupLimits);
      return client.query(returning === 'rows' ? { text, ...RETURNED_AS_TEXT } : text);
    });

  /**
   * Each chunk of `chunkRows` written by `writeChunk`: a single chunk alone, its settings before its
   * statement in one query (one statement is atomic, and the query one implicit transaction);
   * several, or a writer whose statement cannot carry the settings, in one transaction that BEGIN
   * sets them for.
   * @template T
   * @param {UserRow[]} rows @param {number | undefined} lockTimeoutMs  a lock timeout of its own
   * @param {ChunkWriter} writer  whether it needsTransaction, what it beginsWith
   * @param {OnConflict} onConflict
   * @param {(client: PoolClient, chunk: UserRow[], settings: string) => Promise<T>} writeChunk
   * @returns {Promise<T[]>}
   */
  function inChunks(rows, lockTimeoutMs, writer, onConflict, writeChunk) {
    const limits = lockTimeoutMs ? { lockTimeoutMs } : undefined;
    if (!writer.needsTransaction && rows.length <= chunkRows) return db.withClient(async (client) => [await writeChunk(client, rows, settings.statement('', limits))]);
    return db.transaction(async (client) => {
      /** @type {T[]} */
      const results = [];
      for (let start = 0; start < rows.length; start += chunkRows) results.push(await writeChunk(client, rows.slice(start, start + chunkRows), ''));
      return results;
    }, { limits, then: writer.beginWith?.(onConflict) });
  }

  /** @param {UserRow[]} rows @param {OnConflict} onConflict @param {number} [lockTimeoutMs] @returns {Promise<Counts>} */
  async function write(rows, onConflict, lockTimeoutMs) {
    const chunks = await inChunks(rows, lockTimeoutMs, chunkWriter, onConflict, (client, chunk, prefix) => chunkWriter.write(client, chunk, onConflict, prefix));
    if (chunks.length === 1) return chunks[0];
    const total = { inserted: 0, updated: 0 };
    for (const counts of chunks) {
      total.inserted += counts.inserted;
      total.updated += counts.updated;
    }
    return total;
  }

  /**
   * Writes rows and answers them as written: a pg-format statement a chunk whatever the strategy,
   * RETURNING each row (return=representation, which the default path never pays for).
   * @param {UserRow[]} rows @param {OnConflict} onConflict @param {number} [lockTimeoutMs]
   * @returns {Promise<Counts & { users: WrittenUser[] }>}
   */
  function writeReturningRows(rows, onConflict, lockTimeoutMs) {
    /** @param {PoolClient} client @param {UserRow[]} chunk @param {string} prefix @returns {Promise<WrittenUser[]>} */
    const writeChunk = async (client, chunk, prefix) =>
      writtenUsers(chunk, await client.query({ text: prefix + writeStatement(rowsAsArrays(chunk), onConflict, 'rows'), ...RETURNED_AS_TEXT }), onConflict);
    /** @param {WrittenUser[]} users */
    const counted = (users) => {
      let inserted = 0;
      for (const u of users) if (u.updatedAt === null) inserted++;
      return { inserted, updated: users.length - inserted, users };
    };
    return inChunks(rows, lockTimeoutMs, formatWriter, onConflict, writeChunk).then((chunks) => counted(chunks.flat()));
  }

  /**
   * All-new first; resolving conflicts after a unique violation, or at once while replays are
   * likely. Every way in (a request alone, a group) goes through here.
   * @template T
   * @param {number} rowCount
   * @param {() => Promise<T>} asNew  fails with a unique violation when an email is stored
   * @param {() => Promise<T>} resolving
   * @param {(result: T) => number} insertedOf
   * @returns {Promise<T>}
   */
  async function allNewFirst(rowCount, asNew, resolving, insertedOf) {
    if (!replays.likely()) {
      try {
        return await asNew();
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
      }
    }
    const result = await resolving();
    if (insertedOf(result) < rowCount) replays.seen();
    return result;
  }

  /**
   * @template T
   * @param {() => Promise<T>} attempt
   * @returns {Promise<T>}
   */
  async function withDiagnosis(attempt) {
    /** @type {unknown} the first attempt's failure, when it may have been committed all the same */
    let inDoubt;
    try {
      return await attempt();
    } catch (err) {
      const diagnosis = await db.diagnose(err);
      if (diagnosis !== 'transient') throw refusalOfDatabaseState(diagnosis, err) ?? err;
      if (outcomeInDoubt(err)) inDoubt = err;
    }
    // The database answers: the first attempt failed for a passing reason. Once more (safe even
    // when the first may have been written: a replay writes nothing twice), then its own; but if
    // the first may have been written, no failure of the second can say nothing was.
    try {
      return await attempt();
    } catch (err) {
      const refusal = refusalOfDatabaseState(await db.diagnose(err), err) ?? err;
      throw inDoubt === undefined || refusal instanceof OutcomeUnknownError ? refusal : new OutcomeUnknownError(inDoubt);
    }
  }

  return {
    /**
     * One request's rows, all or nothing.
     * @param {UserRow[]} rows  validated, sorted by email, no email twice
     * @param {Resolution} resolution
     * @param {{ lockTimeoutMs?: number } & WriteOptions} [options]  lockTimeoutMs: a lock_timeout of its own
     *   instead of DB_LOCK_TIMEOUT_MS
     * @returns {Promise<Counts>}
     * @throws {DatabaseUnavailableError | DatabaseTimeoutError | OutcomeUnknownError} or the request's own failure
     */
    writeUsers: (rows, resolution, { lockTimeoutMs, withRows } = {}) =>
      withDiagnosis(() =>
        withRows
          ? allNewFirst(rows.length, () => writeReturningRows(rows, 'fail', lockTimeoutMs), () => writeReturningRows(rows, onConflictFor(resolution), lockTimeoutMs), (c) => c.inserted)
          : allNewFirst(rows.length, () => write(rows, 'fail', lockTimeoutMs), () => write(rows, onConflictFor(resolution), lockTimeoutMs), (c) => c.inserted),
      ),

    /**
     * One pg-format statement whatever the strategy, telling what it did to each email (group
     * commit credits each to its request): 'all' when every row was inserted, else the emails
     * written, true where inserted and false where updated. Failures are thrown undiagnosed: group
     * commit decides what a failed group means.
     * With withRows, the statement returns every row it wrote and the answer is those rows by email
     * (group commit hands each request its own).
     * @param {UserRow[]} rows  sorted by email, no email twice, at most one statement's worth
     * @param {Resolution} resolution
     * @param {boolean} [withRows]
     * @returns {Promise<'all' | Map<string, boolean | WrittenUser>>}
     */
    writeGroup: (rows, resolution, withRows) => (withRows ? writeGroupRows(rows, resolution) : writeGroupCounts(rows, resolution)),
  };

  /** @param {UserRow[]} rows @param {Resolution} resolution @returns {Promise<Map<string, WrittenUser>>} */
  function writeGroupRows(rows, resolution) {
    /** @param {OnConflict} onConflict */
    const attempt = (onConflict) =>
      groupQuery(rows, onConflict, 'rows').then((r) => new Map(writtenUsers(rows, r, onConflict).map((u) => [u.email, u])));
    return allNewFirst(rows.length, () => attempt('fail'), () => attempt(onConflictFor(resolution)), (r) => {
      let inserted = 0;
      for (const u of r.values()) if (u.updatedAt === null) inserted++;
      return inserted;
    });
  }

  /** @param {UserRow[]} rows @param {Resolution} resolution @returns {Promise<'all' | Map<string, boolean>>} */
  function writeGroupCounts(rows, resolution) {
    return allNewFirst(
      rows.length,
      () => groupQuery(rows, 'fail', 'none').then(() => /** @type {const} */ ('all')),
      () => groupQuery(rows, onConflictFor(resolution), 'emails').then((r) => new Map(lastResult(r).rows.map((row) => [row.email, row.inserted]))),
      (r) => (r === 'all' ? rows.length : [...r.values()].filter(Boolean).length),
    );
  }
}

/** @typedef {ReturnType<typeof createUserWriter>} UserWriter */

/**
 * The rows a statement wrote as a representation shows them, from what it returned
 * (user-sql.js RETURNING_ROWS: now(), then the emails written, or none when it had to write every
 * row; in merge mode each row's email, created_at, phone and updated_at) and the rows sent. PostgreSQL returns them in the order they were sent
 * (sorted by email), so the two are walked side by side; should a plan ever return them in another
 * order, they are matched by email.
 * @param {UserRow[]} sent  sorted by email, no email twice
 * @param {import('pg').QueryResult | import('pg').QueryResult[]} result  pg's, rows as arrays of text
 *   (RETURNED_AS_TEXT); several when statements came before the write (now(), a SET LOCAL)
 * @param {OnConflict} onConflict
 * @returns {WrittenUser[]} in the order of `sent`
 */
export function writtenUsers(sent, result, onConflict) {
  /** @type {(string | null)[][]} */
  const returned = lastResult(result).rows;
  const merge = onConflict === 'merge';
  const now = merge ? '' : timestampAsJson((Array.isArray(result) ? result : [result]).find((r) => r.command === 'SELECT')?.rows[0][0]);
  /** @param {UserRow} row @param {(string | null)[]} r @returns {WrittenUser} */
  const user = merge ? mergedUser : (/** @type {UserRow} */ row) => insertedUser(row, now);
  // Without a conflict clause the statement wrote every row, or failed.
  if (onConflict === 'fail') return sent.map((row) => user(row, []));
  /** @type {WrittenUser[]} */
  const users = [];
  let next = 0;
  for (const row of sent) {
    if (next === returned.length) break;
    if (returned[next][0] === row.email) users.push(user(row, returned[next++]));
  }
  if (next === returned.length) return users;
  const byEmail = new Map(returned.map((r) => [r[0], r]));
  users.length = 0;
  for (const row of sent) {
    const r = byEmail.get(row.email);
    if (r) users.push(user(row, r));
  }
  return users;
}
