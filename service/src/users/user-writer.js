import { lastResult } from '../db/transaction-settings.js';
import { allNewFirst } from './all-new-first.js';
import { STRATEGIES, formatWriter, insertQuery } from './chunk-writers.js';
import { keepQuarantined } from './quarantine.js';
import { createReplayGuess } from './replay-guess.js';
import { RETURNED_AS_TEXT, createdNowOf, insertedUser, mergedUser, rowsAsArrays, writeStatement } from './user-sql.js';
import { createWritePolicy } from './write-policy.js';

// The user writer: `write`, the one way in for every kind of write but the stream (write-policy.js
// says how each kind is timed and what its failure means). A request is chunked (one transaction
// when several chunks), a group is one pg-format statement; both go all-new first (all-new-first.js),
// resolving conflicts at once while replays are likely (replay-guess.js).

/** @typedef {import('./user-schema.js').UserRow} UserRow @typedef {import('./user-schema.js').Resolution} Resolution @typedef {import('./user-sql.js').OnConflict} OnConflict */
/** @typedef {import('../db/lending.js').Lending} Lending @typedef {import('../db/transaction-settings.js').TimeLimits} TimeLimits @typedef {import('./chunk-writers.js').ChunkWriter} ChunkWriter */
/** @typedef {import('./insert-strategies.js').InsertStrategy} Strategy @typedef {import('./write-policy.js').WriteKind} WriteKind */
/** @typedef {import('../user-columns.js').WrittenUser} WrittenUser  a row as written; inserted when updatedAt is null */
/** @typedef {{ inserted: number, updated: number, users?: WrittenUser[] }} Counts  one request's; users (by email) when withRows */
/** quarantine: items set aside, kept in the rows' transaction (never grouped). @typedef {{ withRows?: boolean, quarantine?: Quarantine }} WriteOptions @typedef {{ rows: UserRow[], withRows: boolean }} Part */
/** @typedef {import('./quarantine.js').Quarantine} Quarantine */
/** rows: sorted by email, each once; parts: a group's requests. @typedef {{ kind: Exclude<WriteKind, 'stream'>, rows: UserRow[], resolution: Resolution, withRows?: boolean, parts?: readonly Part[], quarantine?: Quarantine }} WriteRequest */
/** @typedef {Counts[]} Written  per request carried: a group's parts in order, else the one */
/** @typedef {{ db: import('../db/database.js').Database, chunkRows: number, chunkWriter: ChunkWriter, replays: ReturnType<typeof createReplayGuess>, policy: import('./write-policy.js').WritePolicy }} Writer */

/** @param {Resolution} resolution @returns {OnConflict} */
const onConflictFor = (resolution) => (resolution === 'merge' ? 'merge' : 'skip');

/** @param {import('../db/database.js').Database} db @param {{ chunkRows: number, strategy: Strategy, policy?: import('./write-policy.js').WritePolicy }} options */
export function createUserWriter(db, { chunkRows, strategy, policy = createWritePolicy(db) }) {
  const writer = /** @type {Writer} */ ({ db, chunkRows, chunkWriter: STRATEGIES[strategy], replays: createReplayGuess(), policy });
  return {
    /** A failure as the policy answers it; a group's as it came, for group commit. @param {WriteRequest} request @returns {Promise<Written>} */
    write: (request) => (request.kind === 'group' ? writeGroup(writer, request) : tried(writer, request.kind, () => writeRequest(writer, request))),
  };
}

/** @typedef {ReturnType<typeof createUserWriter>} UserWriter */

/** An attempt, and once more when the policy says so. @template T @param {Writer} writer @param {WriteKind} kind @param {() => Promise<T>} attempt @returns {Promise<T>} */
async function tried({ policy }, kind, attempt) {
  let first = /** @type {unknown} */ (undefined);
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

/** All-new first, but resolving at once while replays are likely. @template T @param {Writer} writer @param {number} rowCount @param {() => Promise<T>} asNew @param {() => Promise<T>} resolving @param {(result: T) => number} insertedOf @returns {Promise<T>} */
function newFirst({ replays }, rowCount, asNew, resolving, insertedOf) {
  const resolved = async () => {
    const result = await resolving();
    if (insertedOf(result) < rowCount) replays.seen();
    return result;
  };
  return allNewFirst(asNew, resolved, { tryNew: !replays.likely() });
}

/** One request's rows by its strategy (by pg-format when it wants them back). @param {Writer} writer @param {WriteRequest} request @returns {Promise<Written>} */
async function writeRequest(writer, { kind, rows, resolution, withRows, quarantine }) {
  const limits = writer.policy.limits(kind);
  /** @param {OnConflict} onConflict @returns {Promise<Counts>} */
  const once = (onConflict) => (withRows ? writeReturningRows(writer, rows, onConflict, limits, quarantine) : writeCounts(writer, rows, onConflict, limits, quarantine));
  return [await newFirst(writer, rows.length, () => once('fail'), () => once(onConflictFor(resolution)), (c) => c.inserted)];
}

/**
 * Chunks by `writeChunk`: one alone with its settings in its query; several (or needsTransaction, or
 * items to set aside, kept after them) in one transaction.
 * @template T @param {Writer} writer @param {UserRow[]} rows @param {TimeLimits | undefined} limits @param {ChunkWriter} chunkWriter
 * @param {OnConflict} onConflict @param {(client: Lending, chunk: UserRow[], settings: string) => Promise<T>} writeChunk @param {Quarantine} [quarantine] @returns {Promise<T[]>}
 */
function inChunks({ db, chunkRows }, rows, limits, chunkWriter, onConflict, writeChunk, quarantine) {
  if (!quarantine && !chunkWriter.needsTransaction && rows.length <= chunkRows) return db.withClient(async (client) => [await writeChunk(client, rows, db.settings.statement('', limits))]);
  return db.transaction(async (client) => {
    const results = /** @type {T[]} */ ([]);
    for (let start = 0; start < rows.length; start += chunkRows) results.push(await writeChunk(client, rows.slice(start, start + chunkRows), ''));
    if (quarantine) await keepQuarantined(client, quarantine);
    return results;
  }, { limits, then: chunkWriter.beginWith?.(onConflict) });
}

/** @param {Writer} writer @param {UserRow[]} rows @param {OnConflict} onConflict @param {TimeLimits | undefined} limits @param {Quarantine} [quarantine] @returns {Promise<Counts>} */
async function writeCounts(writer, rows, onConflict, limits, quarantine) {
  const { chunkWriter } = writer;
  const chunks = await inChunks(writer, rows, limits, chunkWriter, onConflict, (client, chunk, prefix) => chunkWriter.write(client, chunk, onConflict, prefix), quarantine);
  if (chunks.length === 1) return chunks[0];
  const total = { inserted: 0, updated: 0 };
  for (const counts of chunks) {
    total.inserted += counts.inserted;
    total.updated += counts.updated;
  }
  return total;
}

/** Rows written and returned (return=representation): pg-format a chunk. @param {Writer} writer @param {UserRow[]} rows @param {OnConflict} onConflict @param {TimeLimits | undefined} limits @param {Quarantine} [quarantine] @returns {Promise<Counts & { users: WrittenUser[] }>} */
function writeReturningRows(writer, rows, onConflict, limits, quarantine) {
  /** @param {Lending} client @param {UserRow[]} chunk @param {string} prefix @returns {Promise<WrittenUser[]>} */
  const writeChunk = async (client, chunk, prefix) =>
    writtenUsers(chunk, await client.query(insertQuery(prefix + writeStatement(rowsAsArrays(chunk), onConflict, 'rows'), RETURNED_AS_TEXT)), onConflict);
  /** @param {WrittenUser[]} users */
  const counted = (users) => {
    let inserted = 0;
    for (const u of users) if (u.updatedAt === null) inserted++;
    return { inserted, updated: users.length - inserted, users };
  };
  return inChunks(writer, rows, limits, formatWriter, onConflict, writeChunk, quarantine).then((chunks) => counted(chunks.flat()));
}

/**
 * A group: one pg-format statement after its settings, telling what it did to each email; each part
 * credited its share; a failure thrown undiagnosed. @param {Writer} writer @param {WriteRequest} request @returns {Promise<Written>}
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
  const written = await newFirst(writer, rows.length, () => attempt('fail'), () => attempt(onConflictFor(resolution)), (r) => insertedIn(r, rows.length));
  return parts.map((part) => credit(part.rows, written, part.withRows));
}

/** The rows a group's statement inserted. @param {'all' | Map<string, boolean | WrittenUser>} written @param {number} rowCount */
function insertedIn(written, rowCount) {
  if (written === 'all') return rowCount;
  let inserted = 0;
  for (const w of written.values()) if (typeof w === 'object' ? w.updatedAt === null : w) inserted++;
  return inserted;
}

/** One request's share of its group's statement. @param {UserRow[]} rows @param {'all' | Map<string, boolean | WrittenUser>} written @param {boolean} [withRows] @returns {Counts} */
export function credit(rows, written, withRows = false) {
  if (written === 'all') return { inserted: rows.length, updated: 0 };
  const counts = /** @type {Counts} */ ({ inserted: 0, updated: 0 });
  const users = withRows ? /** @type {WrittenUser[]} */ ([]) : undefined;
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
 * The rows a statement wrote, from the rows sent and what it returned (RETURNING_ROWS), side by side else by email.
 * @param {UserRow[]} sent @param {import('pg').QueryResult | import('pg').QueryResult[]} result @param {OnConflict} onConflict @returns {WrittenUser[]}
 */
export function writtenUsers(sent, result, onConflict) {
  const returned = /** @type {(string | null)[][]} */ (lastResult(result).rows);
  const merge = onConflict === 'merge';
  const now = merge ? '' : createdNowOf(result);
  /** @param {UserRow} row @param {(string | null)[]} r @returns {WrittenUser} */
  const user = merge ? mergedUser : (/** @type {UserRow} */ row) => insertedUser(row, now);
  // Without a conflict clause the statement wrote every row, or failed.
  if (onConflict === 'fail') return sent.map((row) => user(row, []));
  const users = /** @type {WrittenUser[]} */ ([]);
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
