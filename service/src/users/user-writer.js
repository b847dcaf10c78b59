import { keyOf, wasInserted } from '../user-columns.js';
import { allNewFirst } from './all-new-first.js';
import { STRATEGIES, sendWrite } from './chunk-writers.js';
import { createReplayGuess } from './replay-guess.js';
import { byEmail } from './user-schema.js';
import { rowsAsArrays, writeWithCounts, writeWithEmails, writeWithUsers } from './user-sql.js';
import { createErasureGuard } from './erasure-guard.js';
import { withoutErased } from './without-erased.js';
import { createWritePolicy } from './write-policy.js';
import { canWriteAtOnce, writeAllNewAtOnce, writeUnit } from './write-unit.js';

// The user writer: `write`, the one way in for every kind of write but the stream, each through the
// write unit all-new first, resolving conflicts at once while replays are likely. A request's rows
// go in chunks (by INSERT_STRATEGY, or pg-format to get them back), a group's in one statement.

/** @import { Database, InsertStrategy, KeyStore, Lending, OnConflict } from './write-types.js' */
/** @import { Outcome, Part, Resolution, RowCounts, RowsStep, UserRow } from './write-types.js' */
/** @import { WriteKind, WritePolicy, WriteRequest, Writer, WrittenUser } from './write-types.js' */
/** @import { ErasureGuard } from './erasure-guard.js' */

/** @param {Resolution} resolution @returns {OnConflict} */
const onConflictFor = (resolution) => (resolution === 'merge' ? 'merge' : 'skip');

/**
 * `erasures`: the assertion each write carries against erased emails.
 * @param {Database} db @param {{ chunkRows: number, strategy: InsertStrategy,
 *   policy?: WritePolicy, keys?: KeyStore, erasures?: ErasureGuard }} options
 */
export function createUserWriter(db, options) {
  const { chunkRows, strategy, keys, erasures = createErasureGuard() } = options;
  const policy = options.policy ?? createWritePolicy(db);
  /** @type {Writer} */
  const writer = {
    db,
    chunkRows,
    chunkWriter: STRATEGIES[strategy],
    replays: createReplayGuess(),
    policy,
    keys,
    erasures,
  };
  /** @param {WriteRequest} request */
  const attempt = (request) =>
    request.kind === 'group'
      ? writeGroup(writer, request)
      : tried(writer, request.kind, () => writeRequest(writer, request));
  return {
    /**
     * Each part's outcome, in order; a failure as the policy answers it, a group's as it came, for
     * group commit. @param {WriteRequest} request @returns {Promise<Outcome[]>}
     */
    write: (request) => withoutErased(writer, request, attempt),
  };
}

/** @typedef {ReturnType<typeof createUserWriter>} UserWriter */

/**
 * An attempt, tried again once when the policy says so; a failure as the policy answers it.
 * @template T @param {{ policy: WritePolicy }} writer @param {WriteKind} kind
 * @param {() => Promise<T>} attempt @returns {Promise<T>}
 */
export async function tried({ policy }, kind, attempt) {
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
 * @param {Writer} writer @param {Part[]} parts
 * @param {() => Promise<Outcome[]>} asNew @param {() => Promise<Outcome[]>} resolving
 */
function newFirst({ replays }, parts, asNew, resolving) {
  let rows = 0;
  for (const part of parts) rows += part.rows.length;
  const resolved = async () => {
    const outcomes = await resolving();
    let inserted = 0;
    for (let i = 0; i < parts.length; i++) {
      const o = outcomes[i];
      inserted += 'taken' in o ? parts[i].rows.length : o.inserted;
    }
    if (inserted < rows) replays.seen();
    return outcomes;
  };
  return allNewFirst(asNew, resolved, { tryNew: !replays.likely() });
}

/** @param {Writer} writer @param {WriteRequest} request */
function writeRequest(writer, { kind, resolution, parts }) {
  const limits = writer.policy.limits(kind);
  /** @param {OnConflict} onConflict */
  const unit = (onConflict) =>
    writeUnit(writer, {
      parts,
      limits,
      rows: parts[0].withRows
        ? chunksReturningRows(writer, parts[0].rows, onConflict)
        : chunksCounted(writer, parts[0].rows, onConflict),
    });
  return newFirst(
    writer,
    parts,
    () => unit('fail'),
    () => unit(onConflictFor(resolution)),
  );
}

/**
 * A request's rows, `chunkRows` a statement; one chunk alone carries the unit's settings.
 * @param {number} chunkRows
 * @param {(client: Lending, chunk: UserRow[], settings: string) => Promise<RowCounts>} writeChunk
 * @param {{ oneStatement: boolean, beginWith?: string }} shape @returns {RowsStep}
 */
function inChunks(chunkRows, writeChunk, shape) {
  return {
    ...shape,
    async write(client, [{ rows }], settings) {
      if (rows.length <= chunkRows) return [await writeChunk(client, rows, settings)];
      /** @type {RowCounts} */
      const total = { inserted: 0, updated: 0 };
      for (let start = 0; start < rows.length; start += chunkRows) {
        const counts = await writeChunk(client, rows.slice(start, start + chunkRows), '');
        total.inserted += counts.inserted;
        total.updated += counts.updated;
        if (counts.users) (total.users ??= []).push(...counts.users);
      }
      return [total];
    },
  };
}

/** @param {Writer} writer @param {UserRow[]} rows @param {OnConflict} onConflict */
function chunksCounted({ chunkRows, chunkWriter, erasures }, rows, onConflict) {
  return inChunks(
    chunkRows,
    (client, chunk, settings) =>
      chunkWriter.write(client, chunk, { onConflict, settings, assertion: erasures.assertion }),
    {
      oneStatement: rows.length <= chunkRows && !chunkWriter.needsTransaction,
      beginWith: chunkWriter.beginWith?.(onConflict),
    },
  );
}

/** @param {Writer} writer @param {UserRow[]} rows @param {OnConflict} onConflict */
function chunksReturningRows({ chunkRows, erasures }, rows, onConflict) {
  return inChunks(
    chunkRows,
    async (client, chunk, settings) => {
      const source = erasures.guard(rowsAsArrays(chunk), chunk);
      return counted(await sendWrite(client, writeWithUsers(chunk, source, onConflict), settings));
    },
    { oneStatement: rows.length <= chunkRows },
  );
}

/** @param {WrittenUser[]} users @returns {RowCounts} */
function counted(users) {
  let inserted = 0;
  for (const u of users) if (wasInserted(u)) inserted++;
  return { inserted, updated: users.length - inserted, users };
}

/**
 * A group: one statement for the rows of every part that goes, each part credited its share; a
 * failure thrown undiagnosed. All new and nothing wanted back, its keys go in that statement too.
 * @param {Writer} writer @param {WriteRequest} request @returns {Promise<Outcome[]>}
 */
function writeGroup(writer, { rows, resolution, parts }) {
  const limits = writer.policy.limits('group');
  /** @param {OnConflict} onConflict @returns {RowsStep} */
  const groupRows = (onConflict) => ({
    oneStatement: true,
    async write(client, going, settings) {
      const goingRows =
        going.length === parts.length ? rows : going.flatMap((part) => part.rows).sort(byEmail);
      const withRows = going.some((part) => part.withRows);
      const source = writer.erasures.guard(rowsAsArrays(goingRows), goingRows);
      const written = await groupStatement(
        client,
        { source, rows: goingRows, withRows },
        {
          onConflict,
          settings,
        },
      );
      return going.map((part) => credit(part.rows, written, part.withRows));
    },
  });
  /** @param {OnConflict} onConflict */
  const unit = (onConflict) => writeUnit(writer, { parts, limits, rows: groupRows(onConflict) });
  const statement = () =>
    writeWithCounts(writer.erasures.guard(rowsAsArrays(rows), rows), 'fail').text;
  const asNew = canWriteAtOnce(parts)
    ? () => writeAllNewAtOnce(writer, { parts, limits, statement: statement() })
    : () => unit('fail');
  return newFirst(writer, parts, asNew, () => unit(onConflictFor(resolution)));
}

/**
 * @param {Lending} client @param {{ source: string, rows: UserRow[], withRows: boolean }} group
 * @param {{ onConflict: OnConflict, settings: string }} how
 * @returns {Promise<'all' | Map<string, boolean | WrittenUser>>}
 */
async function groupStatement(client, { source, rows, withRows }, { onConflict, settings }) {
  if (withRows) {
    const users = await sendWrite(client, writeWithUsers(rows, source, onConflict), settings);
    return new Map(users.map((u) => [keyOf(u), u]));
  }
  if (onConflict === 'fail')
    return sendWrite(client, writeWithCounts(source, onConflict), settings).then(() => 'all');
  return sendWrite(client, writeWithEmails(source, onConflict), settings);
}

/**
 * @param {UserRow[]} rows @param {'all' | Map<string, boolean | WrittenUser>} written
 * @param {boolean} [withRows] @returns {RowCounts}
 */
export function credit(rows, written, withRows = false) {
  if (written === 'all') return { inserted: rows.length, updated: 0 };
  /** @type {RowCounts} */
  const counts = { inserted: 0, updated: 0 };
  /** @type {WrittenUser[] | undefined} */
  const users = withRows ? [] : undefined;
  for (const row of rows) {
    const w = written.get(keyOf(row));
    const inserted = typeof w === 'object' ? wasInserted(w) : w;
    if (inserted === true) counts.inserted++;
    else if (inserted === false) counts.updated++;
    if (users && typeof w === 'object') users.push(w);
  }
  if (users) counts.users = users;
  return counts;
}
