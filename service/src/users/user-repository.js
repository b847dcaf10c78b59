import { lastResult } from '../db/transaction-settings.js';
import { STRATEGIES, formatWriter, insertQuery } from './chunk-writers.js';
import { createReplayGuess } from './replay-guess.js';
import { RETURNED_AS_TEXT, createdNowOf, insertedUser, mergedUser, rowsAsArrays, writeStatement } from './user-sql.js';
import { createWritePolicy } from './write-policy.js';

// config.js (and bench/) name the strategies from here.
export { STRATEGIES } from './chunk-writers.js';

/** @typedef {import('./user-schema.js').UserRow} UserRow */
/** @typedef {import('./user-schema.js').Resolution} Resolution */
/** @typedef {import('./user-sql.js').OnConflict} OnConflict */
/** @typedef {import('../db/lending.js').Lending} PoolClient */
/** @typedef {import('../db/transaction-settings.js').TimeLimits} TimeLimits */
/** @typedef {import('./chunk-writers.js').ChunkWriter} ChunkWriter */
/** @typedef {import('./chunk-writers.js').Strategy} Strategy */
/** @typedef {import('./write-policy.js').WriteKind} WriteKind */
/**
 * A row as written, as a representation shows it (return=representation), its keys in the
 * answer's order; the write inserted it when updatedAt is null (else it updated it).
 * @typedef {import('../user-columns.js').WrittenUser} WrittenUser
 */
/**
 * What a write did for one request: its counts, and the rows it wrote when asked for them
 * (withRows), sorted by email.
 * @typedef {{ inserted: number, updated: number, users?: WrittenUser[] }} Counts
 */
/** @typedef {{ withRows?: boolean }} WriteOptions  withRows: answer the rows written too (return=representation) */
/**
 * One request a group's statement carries: its rows, and whether it wants them back as written.
 * @typedef {{ rows: UserRow[], withRows: boolean }} Part
 */
/**
 * What to write, and how (the writer's one way in).
 * @typedef {object} WriteRequest
 * @property {Exclude<WriteKind, 'stream'>} kind  how it is written (write-policy.js): its time limits, what its failure means
 * @property {UserRow[]} rows  validated, sorted by email, no email twice: a request's, or a group's
 *   (at most one statement's worth then)
 * @property {Resolution} resolution
 * @property {boolean} [withRows]  answer the rows written (return=representation); a group: any part wants them
 * @property {readonly Part[]} [parts]  a group's requests, in the order their answers are wanted
 */
/**
 * What a write did, per request it carried: a group's parts in their order, else the one request.
 * Each request's Counts has its rows as written (per email) when it asked for them.
 * @typedef {Counts[]} Written
 */
/**
 * The writer's state, shared by its paths.
 * @typedef {{ db: import('../db/database.js').Database, chunkRows: number, chunkWriter: ChunkWriter, replays: ReturnType<typeof createReplayGuess>, policy: import('./write-policy.js').WritePolicy }} Writer
 */

const UNIQUE_VIOLATION = '23505';

/** @param {unknown} err */
export const isUniqueViolation = (err) => /** @type {{ code?: string }} */ (err)?.code === UNIQUE_VIOLATION;

/** @param {Resolution} resolution @returns {OnConflict} */
const onConflictFor = (resolution) => (resolution === 'merge' ? 'merge' : 'skip');

/**
 * Writes validated rows, all or nothing per request: `write` is the one way in, whatever the kind
 * of write (write-policy.js), and answers what it did for each request it carried (Written).
 *
 * A request on its own (batch, alone, slow) is one statement per chunk of `chunkRows` by its
 * strategy; several chunks run in one transaction, a single chunk needs none (one statement is
 * atomic). A group is one pg-format statement whatever the strategy, which tells what it did to
 * each email, so that each request of it is credited its own.
 *
 * Resolving conflicts (ON CONFLICT) costs PostgreSQL about a quarter of its insert rate, and
 * almost every batch is new users. So a write first goes in as all-new; a unique violation rolls
 * that attempt back whole and it is written again resolving conflicts. After a replay the next
 * writes resolve conflicts at once for a while (replays come in runs: a retried message, a
 * re-sent file), so a replay-heavy load never pays twice.
 *
 * A write that fails is answered as the policy decides (write-policy.js): a request's write may
 * be tried once more, then gets its 503 or its own failure; a group's failure is thrown as it is,
 * for group commit to ask the policy what it means for its requests.
 *
 * @param {import('../db/database.js').Database} db
 * @param {{ chunkRows: number, strategy: Strategy, policy?: import('./write-policy.js').WritePolicy }} options
 *   policy: the write policy (its time limits and decisions); by default one with db's diagnosis
 *   and no lock timeout of the groups' own
 */
export function createUserWriter(db, { chunkRows, strategy, policy = createWritePolicy(db) }) {
  /** @type {Writer} */
  const writer = { db, chunkRows, chunkWriter: STRATEGIES[strategy], replays: createReplayGuess(), policy };
  return {
    /**
     * @param {WriteRequest} request
     * @returns {Promise<Written>}
     * @throws {import('../errors.js').DatabaseUnavailableError | import('../errors.js').DatabaseTimeoutError | import('../errors.js').OutcomeUnknownError}
     *   or the write's own failure; a group's failure undiagnosed
     */
    write: (request) => (request.kind === 'group' ? writeGroup(writer, request) : tried(writer, request.kind, () => writeRequest(writer, request))),
  };
}

/** @typedef {ReturnType<typeof createUserWriter>} UserWriter */

/**
 * An attempt, and once more when the policy says so.
 * @template T
 * @param {Writer} writer @param {WriteKind} kind @param {() => Promise<T>} attempt
 * @returns {Promise<T>}
 */
async function tried({ policy }, kind, attempt) {
  /** @type {unknown} */
  let first;
  try {
    return await attempt();
  } catch (err) {
    const decision = await policy.afterFailure(kind, err);
    if (decision.then !== 'retry') throw 'err' in decision ? decision.err : err;
    first = err;
  }
  try {
    return await attempt();
  } catch (err) {
    const decision = await policy.afterFailure(kind, err, first);
    throw 'err' in decision ? decision.err : err;
  }
}

/**
 * All-new first; resolving conflicts after a unique violation, or at once while replays are
 * likely. Every way in (a request alone, a group) goes through here.
 * @template T
 * @param {Writer} writer
 * @param {number} rowCount
 * @param {() => Promise<T>} asNew  fails with a unique violation when an email is stored
 * @param {() => Promise<T>} resolving
 * @param {(result: T) => number} insertedOf
 * @returns {Promise<T>}
 */
async function allNewFirst({ replays }, rowCount, asNew, resolving, insertedOf) {
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
 * One request's rows by its strategy (its rows as written by pg-format, when it wants them).
 * @param {Writer} writer @param {WriteRequest} request
 * @returns {Promise<Written>}
 */
async function writeRequest(writer, { kind, rows, resolution, withRows }) {
  const limits = writer.policy.limits(kind);
  /** @param {OnConflict} onConflict @returns {Promise<Counts>} */
  const once = (onConflict) => (withRows ? writeReturningRows(writer, rows, onConflict, limits) : writeCounts(writer, rows, onConflict, limits));
  return [await allNewFirst(writer, rows.length, () => once('fail'), () => once(onConflictFor(resolution)), (c) => c.inserted)];
}

/**
 * Each chunk of `chunkRows` written by `writeChunk`: a single chunk alone, its settings before its
 * statement in one query (one statement is atomic, and the query one implicit transaction);
 * several, or a writer whose statement cannot carry the settings, in one transaction that BEGIN
 * sets them for.
 * @template T
 * @param {Writer} writer
 * @param {UserRow[]} rows @param {TimeLimits | undefined} limits  the policy's, for this kind of write
 * @param {ChunkWriter} chunkWriter  whether it needsTransaction, what it beginsWith
 * @param {OnConflict} onConflict
 * @param {(client: PoolClient, chunk: UserRow[], settings: string) => Promise<T>} writeChunk
 * @returns {Promise<T[]>}
 */
function inChunks({ db, chunkRows }, rows, limits, chunkWriter, onConflict, writeChunk) {
  if (!chunkWriter.needsTransaction && rows.length <= chunkRows) return db.withClient(async (client) => [await writeChunk(client, rows, db.settings.statement('', limits))]);
  return db.transaction(async (client) => {
    /** @type {T[]} */
    const results = [];
    for (let start = 0; start < rows.length; start += chunkRows) results.push(await writeChunk(client, rows.slice(start, start + chunkRows), ''));
    return results;
  }, { limits, then: chunkWriter.beginWith?.(onConflict) });
}

/** @param {Writer} writer @param {UserRow[]} rows @param {OnConflict} onConflict @param {TimeLimits | undefined} limits @returns {Promise<Counts>} */
async function writeCounts(writer, rows, onConflict, limits) {
  const { chunkWriter } = writer;
  const chunks = await inChunks(writer, rows, limits, chunkWriter, onConflict, (client, chunk, prefix) => chunkWriter.write(client, chunk, onConflict, prefix));
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
 * @param {Writer} writer @param {UserRow[]} rows @param {OnConflict} onConflict @param {TimeLimits | undefined} limits
 * @returns {Promise<Counts & { users: WrittenUser[] }>}
 */
function writeReturningRows(writer, rows, onConflict, limits) {
  /** @param {PoolClient} client @param {UserRow[]} chunk @param {string} prefix @returns {Promise<WrittenUser[]>} */
  const writeChunk = async (client, chunk, prefix) =>
    writtenUsers(chunk, await client.query(insertQuery(prefix + writeStatement(rowsAsArrays(chunk), onConflict, 'rows'), RETURNED_AS_TEXT)), onConflict);
  /** @param {WrittenUser[]} users */
  const counted = (users) => {
    let inserted = 0;
    for (const u of users) if (u.updatedAt === null) inserted++;
    return { inserted, updated: users.length - inserted, users };
  };
  return inChunks(writer, rows, limits, formatWriter, onConflict, writeChunk).then((chunks) => counted(chunks.flat()));
}

/**
 * A group: one pg-format statement whatever the strategy, its settings (the policy's brief lock
 * timeout) before it in one simple query: one implicit transaction, one round trip. It tells what
 * it did to each email: nothing when it had to insert every row ('all'), else the emails written,
 * true where inserted and false where updated, or with withRows every row it wrote. Each part is
 * credited its own share. A failure is thrown undiagnosed: group commit asks the policy.
 * @param {Writer} writer @param {WriteRequest} request
 * @returns {Promise<Written>}
 */
async function writeGroup(writer, { rows, resolution, withRows, parts = [{ rows, withRows: withRows === true }] }) {
  const { db, policy } = writer;
  const limits = policy.limits('group');
  /** @param {OnConflict} onConflict @param {import('./user-sql.js').Returning} returning */
  const query = (onConflict, returning) =>
    db.withClient((client) => client.query(insertQuery(db.settings.statement(writeStatement(rowsAsArrays(rows), onConflict, returning), limits), returning === 'rows' ? RETURNED_AS_TEXT : undefined)));
  /** @param {OnConflict} onConflict @returns {Promise<'all' | Map<string, boolean | WrittenUser>>} */
  const attempt = async (onConflict) => {
    if (withRows) return new Map(writtenUsers(rows, await query(onConflict, 'rows'), onConflict).map((u) => [u.email, u]));
    if (onConflict === 'fail') return query('fail', 'none').then(() => 'all');
    return new Map(lastResult(await query(onConflict, 'emails')).rows.map((row) => [row.email, row.inserted]));
  };
  const written = await allNewFirst(writer, rows.length, () => attempt('fail'), () => attempt(onConflictFor(resolution)), (r) => insertedIn(r, rows.length));
  return parts.map((part) => credit(part.rows, written, part.withRows));
}

/** The rows a group's statement inserted. @param {'all' | Map<string, boolean | WrittenUser>} written @param {number} rowCount */
function insertedIn(written, rowCount) {
  if (written === 'all') return rowCount;
  let inserted = 0;
  for (const w of written.values()) if (typeof w === 'object' ? w.updatedAt === null : w) inserted++;
  return inserted;
}

/**
 * One request's share of what its group's statement did: its counts, and its rows as written when
 * it wants them (the statement returned rows then).
 * @param {UserRow[]} rows @param {'all' | Map<string, boolean | WrittenUser>} written @param {boolean} [withRows]
 * @returns {Counts}
 */
export function credit(rows, written, withRows = false) {
  if (written === 'all') return { inserted: rows.length, updated: 0 };
  /** @type {Counts} */
  const counts = { inserted: 0, updated: 0 };
  /** @type {WrittenUser[] | undefined} */
  const users = withRows ? [] : undefined;
  for (const row of rows) {
    const w = written.get(row.email);
    const inserted = typeof w === 'object' ? w.updatedAt === null : w;
    if (inserted === true) counts.inserted++;
    else if (inserted === false) counts.updated++;
    if (users && typeof w === 'object') users.push(w);
  }
  if (users) counts.users = users;
  return counts;
}

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
  const now = merge ? '' : createdNowOf(result);
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
