import { timeoutOf } from '../db/database.js';
import { ApiError, InvalidBatchError } from '../errors.js';
import { allNewFirst, isUniqueViolation } from './all-new-first.js';
import { ChunkBuffer } from './chunk-buffer.js';
import { copyAll, longQuery, startCopy } from './copy-from.js';
import { claimed, keyInFlight, scopedKey, storeAnswers } from './idempotency-keys.js';
import { createCsvParser, createNdjsonParser } from './stream-parse.js';
import { keptCsv, keptJson, keptUnreadable } from './kept-item.js';
import { QUARANTINE_KEEP_CHARS, keepQuarantinedSoFar, overBound } from './quarantine.js';
import { MAX_REPORTED_ERRORS, checkUser } from './user-schema.js';
import {
  COPY_STREAM_STAGING,
  COPY_USERS,
  CREATE_STREAM_STAGING,
  EMPTY_STREAM_STAGING,
  FIRST_OF_EACH,
  INSERT_ALL_AS_SENT,
  MERGED_OF_EACH,
  csvLine,
  writeStatement,
} from './user-sql.js';
import { STREAM_LIMITS } from './write-policy.js';

// A streamed import: the text of a body (NDJSON or CSV) of any size, parsed and checked record by
// record and sent on through COPY as it comes, all or nothing in one transaction. Ignore mode
// copies straight into users a chunk at a time, all-new first (a chunk that meets a stored or
// repeated email goes through the staging table, and so does every chunk after it); merge mode
// stages the whole body, then writes it all-new first (an email's last line wins). Given a
// Quarantine, an invalid record is set aside instead (kept in the same transaction, at its end). An
// Idempotency-Key is claimed in BEGIN's round trip and its answer stored in COMMIT's; a key taken
// ends the transaction at once, and the body is read to its end, for its fingerprint, writing
// nothing.

/** @typedef {import('./quarantine.js').Quarantine} Quarantine */
/**
 * @typedef {'ndjson' | 'csv'} StreamFormat
 * @typedef {{ received: number, inserted: number, updated: number, quarantine?: Quarantine,
 *   answer?: import('./idempotency-keys.js').StoredAnswer }} ImportCounts
 */
/**
 * @typedef {import('./idempotency-keys.js').IdempotencyKey} IdempotencyKey
 * @typedef {import('./user-writer.js').KeyTaken} KeyTaken
 */
/**
 * @typedef {{ keys: import('./idempotency-keys.js').KeyStore | undefined,
 *   key: IdempotencyKey | undefined, begun: boolean }} Keyed
 */

/**
 * What a stream holds at once (buffers, a piece, a record, COPY's lead, a chunk), for admission
 * control.
 */
export const STREAM_HOLD_BYTES = 1.5 * 1024 * 1024;
/** Rows a chunk of ignore mode holds until it is in users (within CHUNK_BYTES at 130-byte rows). */
const CHUNK_ROWS = 7_500;
const CHUNK_BYTES = 1024 * 1024;

/**
 * @param {{ db: import('../db/database.js').Database,
 *   policy: import('./write-policy.js').WritePolicy,
 *   keys?: import('./idempotency-keys.js').KeyStore }} deps
 */
export function createStreamImport({ db, policy, keys }) {
  /**
   * The counts once committed (with a key, and its answer stored), or the key taken; a failure of
   * `texts` itself thrown as it came, any other as the policy answers a stream's.
   * @param {AsyncIterable<string>} texts
   * @param {StreamFormat} format
   * @param {import('./user-schema.js').Resolution} resolution
   * @param {{ key?: IdempotencyKey, quarantine?: Quarantine }} [options] a key to claim; where to
   *   set invalid records aside
   * @returns {Promise<ImportCounts | KeyTaken>}
   */
  return async function importUsers(texts, format, resolution, { key, quarantine } = {}) {
    const source = watchedSource(texts);
    /** @type {Keyed} */
    const keyed = { keys, key, begun: false };
    try {
      const outcome = await (resolution === 'merge'
        ? importMerging(db, source.texts, format, keyed, quarantine)
        : importIgnoring(db, source.texts, format, keyed, quarantine));
      // the rest of the body, for its fingerprint
      if ('taken' in outcome) for await (const _ of source.texts);
      return outcome;
    } catch (err) {
      if (err instanceof ApiError || source.failedWith(err)) throw err;
      if (key && !keyed.begun && timeoutOf(err) === 'lock_timeout') throw keyInFlight(err);
      const decision = await policy.afterFailure('stream', err);
      throw 'err' in decision ? decision.err : err;
    }
  };
}

/**
 * The text source, and whether a failure is its own (the reader's, not the database's).
 * @param {AsyncIterable<string>} texts
 */
function watchedSource(texts) {
  /** @type {{ err: unknown } | undefined} */
  let failure = undefined;
  return {
    texts: (async function* () {
      try {
        yield* texts;
      } catch (err) {
        failure = { err };
        throw err;
      }
    })(),
    /** @param {unknown} err */
    failedWith: (err) => failure !== undefined && failure.err === err,
  };
}

/**
 * One transaction, no statement timeout; BEGIN carries `then` and the key's claim (a key taken:
 * nothing more); its answer stored with COMMIT.
 * @param {import('../db/database.js').Database} db @param {string} then @param {Keyed} keyed
 * @param {(client: import('../db/lending.js').Lending) => Promise<ImportCounts>} fn
 * @returns {Promise<ImportCounts | KeyTaken>}
 */
function streamTransaction(db, then, keyed, fn) {
  const { keys, key } = keyed;
  const claim = key && keys ? keys.claim([key]) : '';
  return db.transaction(
    async (client, begun) => {
      keyed.begun = true;
      if (!key) return fn(client);
      const found = (await claimed(client, begun, [key])).get(scopedKey(key));
      if (found !== 'claimed') return { taken: found ?? null };
      const counts = await fn(client);
      client.withCommit(storeAnswers([{ key, answer: (counts.answer = key.answer(counts)) }]));
      return counts;
    },
    { limits: STREAM_LIMITS, then: then && claim ? `${then}; ${claim}` : then || claim },
  );
}

/**
 * Ignore mode: straight into users a chunk at a time.
 * @param {import('../db/database.js').Database} db
 * @param {AsyncIterable<string>} texts
 * @param {StreamFormat} format
 * @param {Keyed} keyed
 * @param {Quarantine} [quarantine]
 */
function importIgnoring(db, texts, format, keyed, quarantine) {
  return streamTransaction(db, '', keyed, async (client) => {
    const body = validatedBody(texts, format, quarantine);
    const chunks = await chunkedCopy(client);
    try {
      let chunkStart = 0;
      for await (const csv of body.pieces(chunks.abandon)) {
        await chunks.send(csv);
        if (body.received - chunkStart >= CHUNK_ROWS) {
          // Between two chunks no COPY runs: the items set aside so far are kept there, once they
          // are many.
          const keep =
            quarantine && quarantine.heldChars >= QUARANTINE_KEEP_CHARS
              ? () => keepQuarantinedSoFar(client, quarantine)
              : undefined;
          await chunks.next(keep);
          chunkStart = body.received;
        }
      }
      await chunks.send(body.end());
      const inserted = await chunks.end();
      if (quarantine) await keepQuarantinedSoFar(client, quarantine);
      return { received: body.received, inserted, updated: 0, quarantine };
    } catch (err) {
      await chunks.close();
      throw err;
    }
  });
}

/**
 * Merge mode: all staged, then into users.
 * @param {import('../db/database.js').Database} db
 * @param {AsyncIterable<string>} texts
 * @param {StreamFormat} format
 * @param {Keyed} keyed
 * @param {Quarantine} [quarantine]
 */
function importMerging(db, texts, format, keyed, quarantine) {
  return streamTransaction(db, CREATE_STREAM_STAGING, keyed, async (client) => {
    const body = validatedBody(texts, format, quarantine);
    const copy = await startCopy(client, COPY_STREAM_STAGING);
    /** @param {string} csv */
    const send = async (csv) => {
      if (csv !== '') await copy.write(Buffer.from(csv));
    };
    try {
      for await (const csv of body.pieces(copy.abandon)) {
        await send(csv);
        const failure = copy.error();
        if (failure) throw failure;
      }
      await send(body.end());
      const { error } = await copy.finish();
      if (error) throw error;
    } catch (err) {
      // The COPY ended before the transaction rolls back.
      copy.abandon();
      await copy.finish();
      throw err;
    }
    const merged = await writeMerged(client);
    if (quarantine) await keepQuarantinedSoFar(client, quarantine);
    return { received: body.received, ...merged, quarantine };
  });
}

/**
 * The body's users, parsed and checked (the one schema) as they are read, as the CSV COPY takes.
 * Once one is invalid nothing more is sent: reading goes on only to name up to MAX_REPORTED_ERRORS.
 * Given a quarantine, an invalid record is set aside instead, until one past its bound.
 * @param {AsyncIterable<string>} texts
 * @param {StreamFormat} format
 * @param {Quarantine} [quarantine]
 */
function validatedBody(texts, format, quarantine) {
  let received = 0;
  let invalid = 0;
  /** @type {import('../errors.js').ItemError[]} */
  const problems = [];
  let csv = '';
  // Set aside while under the bound; past it, the body is refused as it is without a quarantine.
  let settingAside = quarantine !== undefined;

  /** @param {import('./quarantine.js').QuarantinedItem} item */
  const setAside = (item) => {
    const q = /** @type {Quarantine} */ (quarantine);
    if (format === 'csv') q.csvHeader ??= parser.columns?.join(',') ?? null;
    q.add(item);
    if (!q.isOver) return;
    settingAside = false;
    invalid = q.count;
    csv = '';
    problems.push(...q.errors);
  };
  /** @param {import('../errors.js').ItemError[]} found @param {number} line */
  const refuse = (found, line) => {
    invalid++;
    csv = '';
    for (const problem of found)
      if (problems.length < MAX_REPORTED_ERRORS) problems.push({ ...problem, line });
  };

  /** @type {import('./stream-parse.js').OnRecord} */
  const onRecord = (item, line, duplicates, text) => {
    const index = received++;
    const checked =
      duplicates.length > 0
        ? []
        : checkUser(item, index, settingAside || problems.length < MAX_REPORTED_ERRORS);
    if (!Array.isArray(checked)) {
      if (invalid === 0) csv += csvLine(checked);
      return;
    }
    const found =
      duplicates.length > 0
        ? duplicates.map((field) => ({
            index,
            field,
            message: 'is given more than once in this object; send each field once',
          }))
        : /** @type {import('../errors.js').ItemError[]} */ (checked);
    if (!settingAside) return refuse(found, line);
    const kept =
      format === 'csv'
        ? keptCsv(
            /** @type {Record<string, string>} */ (item),
            /** @type {readonly string[]} */ (parser.columns),
            text,
          )
        : keptJson(item, text);
    setAside({
      position: index,
      line,
      reason: 'invalid_user',
      errors: found.map((problem) => ({ ...problem, line })),
      ...kept,
    });
  };
  /** @type {import('./stream-parse.js').OnUnreadable} */
  const onUnreadable = (line, text, message) => {
    const index = received++;
    const found = [{ index, field: null, message, line }];
    if (!settingAside) return refuse(found, line);
    setAside({
      position: index,
      line,
      reason: format === 'csv' ? 'malformed_csv' : 'malformed_json',
      errors: found,
      ...keptUnreadable(line, text),
    });
  };
  const parser =
    format === 'csv'
      ? createCsvParser(quarantine && { onUnreadable })
      : createNdjsonParser(quarantine && { onUnreadable });

  const refusal = (complete = true) =>
    quarantine
      ? overBound(
          invalid,
          received,
          quarantine.maxInvalid,
          problems.slice(0, MAX_REPORTED_ERRORS),
          complete,
        )
      : new InvalidBatchError(
          `${complete ? '' : 'at least '}${invalid} of ${complete ? '' : 'the first '}` +
            `${received} users are invalid; nothing was written`,
          problems,
        );
  const taken = () => {
    const piece = csv;
    csv = '';
    return piece;
  };

  return {
    /** The records parsed so far. */
    get received() {
      return received;
    },
    /**
     * The CSV of each piece read; `onInvalid` told after each once a user is invalid.
     * @param {() => void} onInvalid
     * @returns {AsyncGenerator<string>}
     */
    async *pieces(onInvalid) {
      for await (const text of texts) {
        parser.feed(text, onRecord);
        if (invalid > 0) {
          onInvalid();
          if (problems.length >= MAX_REPORTED_ERRORS) throw refusal(false);
          continue;
        }
        yield taken();
      }
    },
    /** The body's end: the CSV of its last users, or the refusal of an invalid or empty body. */
    end() {
      parser.end(onRecord);
      if (invalid > 0) throw refusal();
      if (received === 0)
        throw new ApiError('empty_batch', 'the body holds no users: send at least one');
      return taken();
    },
  };
}

/**
 * Ignore mode's chunks, all-new first: COPY into users under a savepoint; a chunk that meets a
 * stored or repeated email goes through the staging table, and so does every chunk after it.
 * @param {import('../db/lending.js').Lending} client
 */
async function chunkedCopy(client) {
  const chunk = new ChunkBuffer(CHUNK_BYTES);
  let staged = false;
  let inserted = 0;
  /** @type {import('./copy-from.js').CopyInto | undefined} */
  let copy = await startCopy(client, COPY_USERS, 'chunk'); // none once staged

  const copied = async () => {
    const { rows, error } = await /** @type {import('./copy-from.js').CopyInto} */ (copy).finish();
    copy = undefined;
    if (error) throw error;
    await client.query('RELEASE SAVEPOINT chunk');
    return rows;
  };
  const stagedChunk = async () => {
    const rows = await insertStaged(client, chunk.bytes(), !staged);
    staged = true;
    return rows;
  };
  const endChunk = async () => {
    inserted += await allNewFirst(copied, stagedChunk, {
      tryNew: copy !== undefined,
      undo: () => client.query('ROLLBACK TO SAVEPOINT chunk'),
    });
    chunk.clear();
  };

  return {
    /**
     * Rows on to COPY and into the chunk; a unique violation waits for the chunk's end.
     * @param {string} csv
     */
    async send(csv) {
      // Kept as bytes: a string built row by row is a rope holding all its pieces.
      if (csv !== '') {
        const bytes = chunk.append(csv);
        if (copy) await copy.write(bytes);
      }
      const failure = copy?.error();
      if (failure && !isUniqueViolation(failure)) throw failure;
    },
    /**
     * Ends the chunk, runs `between` (no COPY in progress), and begins the next.
     * @param {() => Promise<void>} [between]
     */
    async next(between) {
      await endChunk();
      await between?.();
      if (!staged) copy = await startCopy(client, COPY_USERS, 'chunk');
    },
    /** Ends the last chunk: the rows inserted in all. */
    async end() {
      await endChunk();
      return inserted;
    },
    /** Nothing will be written: the COPY in progress is abandoned. */
    abandon() {
      copy?.abandon();
    },
    /** The COPY in progress abandoned and ended, before the transaction rolls back. */
    async close() {
      copy?.abandon();
      await copy?.finish();
    },
  };
}

/**
 * A chunk through the staging table, an email's first line, ON CONFLICT DO NOTHING.
 * @param {import('../db/lending.js').Lending} client
 * @param {Buffer} csv
 * @param {boolean} first
 */
async function insertStaged(client, csv, first) {
  await client.query(first ? CREATE_STREAM_STAGING : EMPTY_STREAM_STAGING);
  await copyAll(client, COPY_STREAM_STAGING, csv);
  const result = await longQuery(client, writeStatement(FIRST_OF_EACH, 'skip', 'counts'));
  return /** @type {{ inserted: number }} */ (result.rows[0]).inserted;
}

/**
 * Merge mode's staged rows into users, all-new first.
 * @param {import('../db/lending.js').Lending} client
 * @returns {Promise<{ inserted: number, updated: number }>}
 */
function writeMerged(client) {
  const asNew = async () => {
    await client.query('SAVEPOINT all_new');
    const result = await longQuery(client, INSERT_ALL_AS_SENT);
    return { inserted: result.rowCount ?? 0, updated: 0 };
  };
  const merged = async () =>
    (await longQuery(client, writeStatement(MERGED_OF_EACH, 'merge', 'counts'))).rows[0];
  return allNewFirst(asNew, merged, { undo: () => client.query('ROLLBACK TO SAVEPOINT all_new') });
}
