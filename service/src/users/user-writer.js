import { timeoutOf } from '../db/database.js';
import { lastResult } from '../db/transaction-settings.js';
import { allNewFirst, isUniqueViolation } from './all-new-first.js';
import { STRATEGIES, formatWriter, insertQuery } from './chunk-writers.js';
import { keepQuarantined } from './quarantine.js';
import {
  claimed,
  deleteExpired,
  keyInFlight,
  readKeys,
  scopedKey,
  storeAnswers,
} from './idempotency-keys.js';
import { createReplayGuess } from './replay-guess.js';
import { byEmail } from './user-schema.js';
import {
  RETURNED_AS_TEXT,
  createdNowOf,
  insertedUser,
  mergedUser,
  rowsAsArrays,
  writeStatement,
} from './user-sql.js';
import { createWritePolicy } from './write-policy.js';

// The user writer: `write`, the one way in for every kind of write but the stream (write-policy.js
// says how each kind is timed and what its failure means). A request is chunked (one transaction
// when several chunks), a group is one pg-format statement; both go all-new first
// (all-new-first.js), resolving conflicts at once while replays are likely (replay-guess.js). A
// request with an Idempotency-Key is written in a transaction that claims its key first and stores
// its answer with its COMMIT (idempotency-keys.js); a key taken is that request's outcome instead
// of a write.

/**
 * @typedef {import('./user-schema.js').UserRow} UserRow
 * @typedef {import('./user-schema.js').Resolution} Resolution
 * @typedef {import('./user-sql.js').OnConflict} OnConflict
 */
/**
 * @typedef {import('../db/lending.js').Lending} Lending
 * @typedef {import('../db/transaction-settings.js').TimeLimits} TimeLimits
 * @typedef {import('./chunk-writers.js').ChunkWriter} ChunkWriter
 */
/**
 * @typedef {import('./insert-strategies.js').InsertStrategy} Strategy
 * @typedef {import('./write-policy.js').WriteKind} WriteKind
 */
/**
 * @typedef {import('../user-columns.js').WrittenUser} WrittenUser a row as written; inserted when
 *   updatedAt is null
 */
/**
 * @typedef {import('./idempotency-keys.js').IdempotencyKey} IdempotencyKey
 * @typedef {import('./idempotency-keys.js').StoredAnswer} StoredAnswer
 */
/**
 * One request's; users (by email) when withRows; answer: what a keyed request's answer was stored
 * as.
 * @typedef {{ inserted: number, updated: number, users?: WrittenUser[],
 *   answer?: StoredAnswer }} Counts
 */
/**
 * A request whose key another holds: nothing written for it.
 * @typedef {{ taken: import('./idempotency-keys.js').TakenKey }} KeyTaken
 */
/** @typedef {Counts | KeyTaken} Outcome */
/** @typedef {import('./quarantine.js').Quarantine} Quarantine */
/**
 * quarantine: items set aside, kept in the rows' transaction (never grouped).
 * @typedef {{ withRows?: boolean, key?: IdempotencyKey, quarantine?: Quarantine }} WriteOptions
 * @typedef {{ rows: UserRow[], withRows: boolean, key?: IdempotencyKey }} Part
 */
/**
 * rows: sorted by email, each once; parts: a group's requests.
 * @typedef {object} WriteRequest
 * @property {Exclude<WriteKind, 'stream'>} kind
 * @property {UserRow[]} rows
 * @property {Resolution} resolution
 * @property {boolean} [withRows]
 * @property {IdempotencyKey} [key]
 * @property {readonly Part[]} [parts]
 * @property {Quarantine} [quarantine]
 */
/** @typedef {Outcome[]} Written  per request carried: a group's parts in order, else the one */
/**
 * @typedef {{ db: import('../db/database.js').Database, chunkRows: number,
 *   chunkWriter: ChunkWriter, replays: ReturnType<typeof createReplayGuess>,
 *   policy: import('./write-policy.js').WritePolicy,
 *   keys: import('./idempotency-keys.js').KeyStore | undefined }} Writer
 */

/** @param {Resolution} resolution @returns {OnConflict} */
const onConflictFor = (resolution) => (resolution === 'merge' ? 'merge' : 'skip');

/**
 * keys: the Idempotency-Key store, for requests with a key.
 * @param {import('../db/database.js').Database} db
 * @param {{ chunkRows: number, strategy: Strategy,
 *   policy?: import('./write-policy.js').WritePolicy,
 *   keys?: import('./idempotency-keys.js').KeyStore }} options
 */
export function createUserWriter(
  db,
  { chunkRows, strategy, policy = createWritePolicy(db), keys },
) {
  /** @type {Writer} */
  const writer = {
    db,
    chunkRows,
    chunkWriter: STRATEGIES[strategy],
    replays: createReplayGuess(),
    policy,
    keys,
  };
  return {
    /**
     * A failure as the policy answers it; a group's as it came, for group commit.
     * @param {WriteRequest} request
     * @returns {Promise<Written>}
     */
    write: (request) =>
      request.kind === 'group'
        ? writeGroup(writer, request)
        : tried(writer, request.kind, () => writeRequest(writer, request)),
  };
}

/** @typedef {ReturnType<typeof createUserWriter>} UserWriter */

/**
 * An attempt, and once more when the policy says so.
 * @template T
 * @param {Writer} writer
 * @param {WriteKind} kind
 * @param {() => Promise<T>} attempt
 * @returns {Promise<T>}
 */
async function tried({ policy }, kind, attempt) {
  /** @type {unknown} */
  let first = undefined;
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
 * All-new first, but resolving at once while replays are likely.
 * @template T
 * @param {Writer} writer
 * @param {number} rowCount
 * @param {() => Promise<T>} asNew
 * @param {() => Promise<T>} resolving
 * @param {(result: T) => number} insertedOf
 * @returns {Promise<T>}
 */
function newFirst({ replays }, rowCount, asNew, resolving, insertedOf) {
  const resolved = async () => {
    const result = await resolving();
    if (insertedOf(result) < rowCount) replays.seen();
    return result;
  };
  return allNewFirst(asNew, resolved, { tryNew: !replays.likely() });
}

/**
 * One request's rows by its strategy (by pg-format when it wants them back).
 * @param {Writer} writer
 * @param {WriteRequest} request
 * @returns {Promise<Written>}
 */
async function writeRequest(writer, { kind, rows, resolution, withRows, key, quarantine }) {
  const limits = writer.policy.limits(kind);
  /** @param {OnConflict} onConflict @returns {Promise<Outcome>} */
  const once = (onConflict) =>
    withRows
      ? writeReturningRows(writer, rows, onConflict, limits, key, quarantine)
      : writeCounts(writer, rows, onConflict, limits, key, quarantine);
  return [
    await newFirst(
      writer,
      rows.length,
      () => once('fail'),
      () => once(onConflictFor(resolution)),
      (c) => ('taken' in c ? rows.length : c.inserted),
    ),
  ];
}

/**
 * Chunks by `writeChunk`, totalled: one alone with its settings in its query; several (or
 * needsTransaction, a key, or items to set aside, kept after them) in one transaction, which claims
 * the key in BEGIN's round trip and stores its answer in COMMIT's. A claim that waited out its lock
 * timeout is the key in flight (409).
 * @template T
 * @param {Writer} writer
 * @param {UserRow[]} rows
 * @param {TimeLimits | undefined} limits
 * @param {ChunkWriter} chunkWriter
 * @param {OnConflict} onConflict
 * @param {(client: Lending, chunk: UserRow[], settings: string) => Promise<T>} writeChunk
 * @param {(results: T[]) => Counts} total
 * @param {IdempotencyKey | undefined} key
 * @param {Quarantine} [quarantine]
 * @returns {Promise<Outcome>}
 */
async function inChunks(
  { db, chunkRows, keys },
  rows,
  limits,
  chunkWriter,
  onConflict,
  writeChunk,
  total,
  key,
  quarantine,
) {
  if (!key && !quarantine && !chunkWriter.needsTransaction && rows.length <= chunkRows)
    return total([
      await db.withClient((client) => writeChunk(client, rows, db.settings.statement('', limits))),
    ]);
  const then = [chunkWriter.beginWith?.(onConflict), key && keys?.claim([key])]
    .filter(Boolean)
    .join('; ');
  let begun = false;
  try {
    return await db.transaction(
      async (client, answers) => {
        begun = true;
        if (key) {
          const found = (await claimed(client, answers, [key])).get(scopedKey(key));
          if (found !== 'claimed') return { taken: found ?? null };
        }
        /** @type {T[]} */
        const results = [];
        for (let start = 0; start < rows.length; start += chunkRows)
          results.push(await writeChunk(client, rows.slice(start, start + chunkRows), ''));
        if (quarantine) await keepQuarantined(client, quarantine);
        const counts = total(results);
        if (key)
          client.withCommit(storeAnswers([{ key, answer: (counts.answer = key.answer(counts)) }]));
        return counts;
      },
      { limits, then },
    );
  } catch (err) {
    throw key && !begun && timeoutOf(err) === 'lock_timeout' ? keyInFlight(err) : err;
  }
}

/** @param {Counts[]} chunks @returns {Counts} */
function summed(chunks) {
  if (chunks.length === 1) return chunks[0];
  const total = { inserted: 0, updated: 0 };
  for (const counts of chunks) {
    total.inserted += counts.inserted;
    total.updated += counts.updated;
  }
  return total;
}

/**
 * @param {Writer} writer
 * @param {UserRow[]} rows
 * @param {OnConflict} onConflict
 * @param {TimeLimits | undefined} limits
 * @param {IdempotencyKey} [key]
 * @param {Quarantine} [quarantine]
 * @returns {Promise<Outcome>}
 */
function writeCounts(writer, rows, onConflict, limits, key, quarantine) {
  const { chunkWriter } = writer;
  return inChunks(
    writer,
    rows,
    limits,
    chunkWriter,
    onConflict,
    (client, chunk, prefix) => chunkWriter.write(client, chunk, onConflict, prefix),
    summed,
    key,
    quarantine,
  );
}

/** @param {WrittenUser[][]} chunks @returns {Counts} */
function counted(chunks) {
  const users = chunks.flat();
  let inserted = 0;
  for (const u of users) if (u.updatedAt === null) inserted++;
  return { inserted, updated: users.length - inserted, users };
}

/**
 * Rows written and returned (return=representation): pg-format a chunk.
 * @param {Writer} writer
 * @param {UserRow[]} rows
 * @param {OnConflict} onConflict
 * @param {TimeLimits | undefined} limits
 * @param {IdempotencyKey} [key]
 * @param {Quarantine} [quarantine]
 * @returns {Promise<Outcome>}
 */
function writeReturningRows(writer, rows, onConflict, limits, key, quarantine) {
  /**
   * @param {Lending} client
   * @param {UserRow[]} chunk
   * @param {string} prefix
   * @returns {Promise<WrittenUser[]>}
   */
  const writeChunk = async (client, chunk, prefix) =>
    writtenUsers(
      chunk,
      await client.query(
        insertQuery(
          prefix + writeStatement(rowsAsArrays(chunk), onConflict, 'rows'),
          RETURNED_AS_TEXT,
        ),
      ),
      onConflict,
    );
  return inChunks(
    writer,
    rows,
    limits,
    formatWriter,
    onConflict,
    writeChunk,
    counted,
    key,
    quarantine,
  );
}

/**
 * A group: one pg-format statement after its settings, telling what it did to each email; each part
 * credited its share; a failure thrown undiagnosed.
 * @param {Writer} writer
 * @param {WriteRequest} request
 * @returns {Promise<Written>}
 */
async function writeGroup(
  writer,
  { rows, resolution, withRows, parts = [{ rows, withRows: withRows === true }] },
) {
  if (parts.some((part) => part.key)) return writeKeyedGroup(writer, resolution, parts);
  const { db, policy } = writer;
  const limits = policy.limits('group');
  /** @param {OnConflict} onConflict */
  const attempt = (onConflict) =>
    db.withClient((client) =>
      groupStatement(
        client,
        rows,
        onConflict,
        withRows === true,
        db.settings.statement('', limits),
      ),
    );
  const written = await newFirst(
    writer,
    rows.length,
    () => attempt('fail'),
    () => attempt(onConflictFor(resolution)),
    (r) => insertedIn(r, rows.length),
  );
  return parts.map((part) => credit(part.rows, written, part.withRows));
}

/**
 * A group's one statement (after `settings`), telling what it did to each email.
 * @param {Lending} client
 * @param {UserRow[]} rows
 * @param {OnConflict} onConflict
 * @param {boolean} withRows
 * @param {string} settings
 * @returns {Promise<'all' | Map<string, boolean | WrittenUser>>}
 */
async function groupStatement(client, rows, onConflict, withRows, settings) {
  /** @param {import('./user-sql.js').Returning} returning */
  const query = (returning) =>
    client.query(
      insertQuery(
        settings + writeStatement(rowsAsArrays(rows), onConflict, returning),
        returning === 'rows' ? RETURNED_AS_TEXT : undefined,
      ),
    );
  if (withRows)
    return new Map(writtenUsers(rows, await query('rows'), onConflict).map((u) => [u.email, u]));
  if (onConflict === 'fail') return query('none').then(() => 'all');
  return new Map(lastResult(await query('emails')).rows.map((row) => [row.email, row.inserted]));
}

/**
 * A group with keyed requests: one transaction that writes the rows of the requests that go (one
 * statement) and inserts each keyed one's row, its answer complete, in COMMIT's round trip (no
 * claim first: a key taken meanwhile fails the COMMIT, 23505, and the group is written again
 * without its request, answered from its row; a key in flight is waited for, within the group's
 * lock timeout). A request whose key an earlier part of the group has is in flight. A failure
 * thrown undiagnosed, as a group's.
 * @param {Writer} writer
 * @param {Resolution} resolution
 * @param {readonly Part[]} parts
 * @returns {Promise<Written>}
 */
async function writeKeyedGroup(writer, resolution, parts) {
  const { db, policy, keys } = writer;
  const store = /** @type {import('./idempotency-keys.js').KeyStore} */ (keys);
  /** @type {Set<Part>} */
  const repeated = new Set();
  /** @type {Set<string>} */
  const seen = new Set();
  for (const part of parts) {
    if (!part.key) continue;
    const scoped = scopedKey(part.key);
    if (seen.has(scoped)) repeated.add(part);
    else seen.add(scoped);
  }
  /** @type {Map<Part, import('./idempotency-keys.js').TakenKey>} */
  const taken = new Map();
  /** @type {IdempotencyKey[]} */
  let expired = [];
  const allRows = parts.reduce((n, part) => n + part.rows.length, 0);
  /** @param {Part} part @returns {KeyTaken | undefined} */
  const takenFor = (part) =>
    repeated.has(part)
      ? { taken: null }
      : taken.has(part)
        ? { taken: /** @type {import('./idempotency-keys.js').TakenKey} */ (taken.get(part)) }
        : undefined;

  /**
   * @param {OnConflict} onConflict
   * @returns {Promise<Written | undefined>} undefined: a key was taken meanwhile
   */
  const once = (onConflict) => {
    let committing = false;
    return db
      .transaction(
        async (client) => {
          const going = parts.filter((part) => takenFor(part) === undefined);
          const rows = going.flatMap((part) => part.rows).sort(byEmail);
          const written =
            rows.length === 0
              ? 'all'
              : await groupStatement(
                  client,
                  rows,
                  onConflict,
                  going.some((part) => part.withRows),
                  '',
                );
          const { outcomes, done } = answeredParts(
            parts,
            (part) => takenFor(part) ?? credit(part.rows, written, part.withRows),
          );
          if (done.length > 0) client.withCommit(store.insertAnswers(done));
          committing = true;
          return outcomes;
        },
        {
          limits: policy.limits('group'),
          then: expired.length > 0 ? deleteExpired(expired) : undefined,
        },
      )
      .catch((err) => {
        if (committing && isUniqueViolation(err)) return undefined;
        throw err;
      });
  };
  /** @param {OnConflict} onConflict @returns {Promise<Written>} */
  const attempt = async (onConflict) => {
    for (let tries = 1; ; tries++) {
      const outcomes = await once(onConflict);
      if (outcomes) return outcomes;
      // Stored by another request meanwhile: which, read; expired ones deleted by the next try.
      const going = parts.filter((part) => part.key && takenFor(part) === undefined);
      const found = await db.withClient((client) =>
        readKeys(
          client,
          going.map((part) => /** @type {IdempotencyKey} */ (part.key)),
        ),
      );
      expired = [];
      for (const part of going) {
        const row = found.get(scopedKey(/** @type {IdempotencyKey} */ (part.key)));
        if (!row) continue;
        if (row.expired) expired.push(/** @type {IdempotencyKey} */ (part.key));
        else taken.set(part, row.taken);
      }
      if (tries === MAX_KEY_TRIES)
        throw new Error(`a group's keys were taken ${tries} times in a row`);
    }
  };
  /** @param {Written} outcomes */
  const inserted = (outcomes) =>
    outcomes.reduce((n, o, i) => n + ('taken' in o ? parts[i].rows.length : o.inserted), 0);
  // No request wants its rows back and no key is given twice: every answer is known before the
  // write (all new), so the rows and the keys go in one round trip; a user or a key stored
  // meanwhile (either unique violation) leaves it to the resolving write, which tells them apart.
  const inOneTrip = repeated.size === 0 && !parts.some((part) => part.withRows);
  const asNew = inOneTrip ? () => writeKeyedGroupAsNew(writer, parts) : () => attempt('fail');
  return newFirst(writer, allRows, asNew, () => attempt(onConflictFor(resolution)), inserted);
}

/**
 * A keyed group all new, in one statement: its settings, the rows (a stored email fails it) and
 * each keyed request's row with its answer (a key stored or in flight elsewhere fails it, or is
 * waited for within the group's lock timeout); a multi-statement query is one transaction.
 * @param {Writer} writer @param {readonly Part[]} parts @returns {Promise<Written>}
 */
async function writeKeyedGroupAsNew({ db, policy, keys }, parts) {
  const store = /** @type {import('./idempotency-keys.js').KeyStore} */ (keys);
  const rows = parts.flatMap((part) => part.rows).sort(byEmail);
  const { outcomes, done } = answeredParts(parts, (part) => credit(part.rows, 'all'));
  const text = db.settings.statement(
    `${writeStatement(rowsAsArrays(rows), 'fail', 'none')}; ${store.insertAnswers(done)}`,
    policy.limits('group'),
  );
  await db.withClient((client) => client.query(insertQuery(text)));
  return outcomes;
}

/**
 * A group's outcomes, each part's as `outcomeOf` gives it, each keyed part's counts with the
 * answer they get; and the answers to store, in key order (two groups never wait on each other in
 * a cycle). @param {readonly Part[]} parts @param {(part: Part) => Counts | KeyTaken} outcomeOf
 * @returns {{ outcomes: Written, done: { key: IdempotencyKey, answer: StoredAnswer }[] }}
 */
function answeredParts(parts, outcomeOf) {
  /** @type {{ key: IdempotencyKey, answer: StoredAnswer }[]} */
  const done = [];
  const outcomes = parts.map((part) => {
    const outcome = outcomeOf(part);
    if (part.key && !('taken' in outcome))
      done.push({ key: part.key, answer: (outcome.answer = part.key.answer(outcome)) });
    return outcome;
  });
  done.sort((a, b) => (scopedKey(a.key) < scopedKey(b.key) ? -1 : 1));
  return { outcomes, done };
}

/** Tries of a keyed group whose COMMIT met keys stored meanwhile (each try learns at least one). */
const MAX_KEY_TRIES = 5;

/**
 * The rows a group's statement inserted.
 * @param {'all' | Map<string, boolean | WrittenUser>} written
 * @param {number} rowCount
 */
function insertedIn(written, rowCount) {
  if (written === 'all') return rowCount;
  let inserted = 0;
  for (const w of written.values())
    if (typeof w === 'object' ? w.updatedAt === null : w) inserted++;
  return inserted;
}

/**
 * One request's share of its group's statement.
 * @param {UserRow[]} rows
 * @param {'all' | Map<string, boolean | WrittenUser>} written
 * @param {boolean} [withRows]
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
 * The rows a statement wrote, from the rows sent and what it returned (RETURNING_ROWS), side by
 * side else by email.
 * @param {UserRow[]} sent
 * @param {import('pg').QueryResult | import('pg').QueryResult[]} result
 * @param {OnConflict} onConflict
 * @returns {WrittenUser[]}
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
