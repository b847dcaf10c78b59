import { ApiError, InvalidBatchError } from '../errors.js';
import { sendContinue } from '../http/expect-continue.js';
import { ClientGoneError } from '../http/read-body.js';
import { checkStreamHeaders, readStream, streamFormat } from '../http/stream-body.js';
import { ChunkBuffer } from './chunk-buffer.js';
import { copyAll, longQuery, startCopy } from './copy-from.js';
import { answerWritten } from './post-users.js';
import { createCsvParser, createNdjsonParser } from './stream-parse.js';
import { MAX_REPORTED_ERRORS, checkUser } from './user-schema.js';
import { isUniqueViolation } from './user-repository.js';
import {
  COPY_STREAM_STAGING, COPY_USERS, CREATE_STREAM_STAGING, EMPTY_STREAM_STAGING, FIRST_OF_EACH, INSERT_ALL_AS_SENT, MERGED_OF_EACH, csvLine, writeStatement,
} from './user-sql.js';
import { STREAM_LIMITS } from './write-policy.js';

// POST /users with a streamed body (NDJSON or CSV) of any size, written as it arrives and all or
// nothing: one transaction on one connection; each record is validated (the one schema) and sent
// on through COPY. A problem anywhere rolls it all back: an invalid user (reading then goes on,
// without writing, to name up to 100 of them), a malformed line, a client that leaves, the
// database. Memory does not grow with the body: while COPY is behind, the request is not read.
//
// Ignore mode (the default) copies the body straight into users, a chunk of CHUNK_ROWS at a time
// under a savepoint, so that PostgreSQL takes each row once and while the body is still arriving
// (as psql's \copy does). A chunk that meets an email already stored, or one sent twice, fails
// whole: it is rolled back to its savepoint and written again from the staging table with ON
// CONFLICT DO NOTHING, which keeps an email's first line; from then on every chunk goes that way
// (a body that holds one stored email is likely a replay). Merge mode stages the whole body, then
// writes it into users at its end: an email's last line wins there, which needs all of them.

/**
 * What a stream holds at once, charged to admission control whatever the body's size: the socket's
 * and the decoder's buffers, one piece of text and its CSV (both about a 64 KiB read), the
 * unfinished record (at most MAX_RECORD_CHARS), what COPY may hold ahead (copy-from.js's COPY_AHEAD_BYTES) and
 * ignore mode's chunk (CHUNK_BYTES), with room to spare. At the default budget (3 MiB) it also lets
 * at most two large streams run at once in a process, each on a pooled connection for as long as
 * it lasts, so batches keep the rest of the pool.
 */
export const STREAM_HOLD_BYTES = 1.5 * 1024 * 1024;
/**
 * The rows a chunk of ignore mode holds: its CSV is kept until it is in users. Each chunk's end
 * waits for PostgreSQL to take what was sent, and the parsing waits with it: 20,000 rows a chunk
 * streamed a million at 0.84x psql's rate, 5,000 at 0.76x (medians of 4 runs in one session);
 * 7,500 keep a chunk of 130-byte rows within CHUNK_BYTES, so what a stream holds stays within
 * STREAM_HOLD_BYTES.
 */
const CHUNK_ROWS = 7_500;
/** A chunk's buffer to begin with (grown for longer rows): 7,500 rows of about 130 bytes. */
const CHUNK_BYTES = 1024 * 1024;
// Its statements, the staging table's included, are user-sql.js's.

/**
 * The middleware of a streamed POST /users: passes any other body on (next()), answers a stream
 * itself. Admission control admits a stream for what it holds at once (STREAM_HOLD_BYTES).
 *
 * @param {{
 *   db: import('../db/database.js').Database,
 *   policy: import('./write-policy.js').WritePolicy,
 *   admit: import('express').RequestHandler,
 *   maxStreamBytes: number,
 *   idleTimeoutMs: number,
 *   metrics: import('../metrics.js').Metrics,
 * }} deps  policy: what a failed stream is answered (write-policy.js); admit: admission control,
 *   charging STREAM_HOLD_BYTES
 * @returns {import('express').RequestHandler}
 */
export function streamUsers({ db, policy, admit, maxStreamBytes, idleTimeoutMs, metrics }) {
  return (req, res, next) => {
    const format = streamFormat(req);
    if (format === undefined) return next();
    const unsupported = unsupportedOnStreams(res);
    if (unsupported) return next(unsupported);
    const checked = checkStreamHeaders(req, maxStreamBytes);
    if ('error' in checked) return next(checked.error);
    admit(req, res, (/** @type {unknown} */ err) => (err ? next(err) : serve(req, res, next, format, checked.decoder)));
  };

  /**
   * @param {import('express').Request} req @param {import('express').Response} res @param {import('express').NextFunction} next
   * @param {import('../http/stream-body.js').StreamFormat} format @param {(() => import('node:stream').Transform) | null} decoder
   */
  function serve(req, res, next, format, decoder) {
    sendContinue(res);
    const resolution = /** @type {import('./user-schema.js').Resolution} */ (res.locals.resolution ?? 'ignore');
    const reader = readStream(req, { decoder, maxStreamBytes, idleTimeoutMs });
    importStream(db, policy, reader, format, resolution).then(
      ({ received, inserted, updated }) => {
        reader.close();
        if (!req.complete) req.resume(); // anything after a compressed stream, so the request ends
        metrics.streamSize.observe(received);
        // representation was refused before the body was read (unsupportedOnStreams).
        answerWritten(res, metrics, { received, inserted, updated });
      },
      (failure) => {
        reader.close();
        // The client went away mid-body: nothing was written, and nobody is left to answer.
        if (failure instanceof ClientGoneError) return req.socket.destroy();
        next(failure);
      },
    );
  }
}

/**
 * What a stream cannot do of PostgREST's interface (http/prefer.js, http/write-query.js): answer its
 * rows (there may be millions), or read only some columns; refused before anything is read.
 * @param {import('express').Response} res
 * @returns {ApiError | undefined}
 */
function unsupportedOnStreams(res) {
  if (res.locals.returnPreference === 'representation') {
    return new ApiError('unsupported_preference', 'Prefer: return=representation is not supported on a streamed body (NDJSON, CSV): send return=minimal or none (the counts)');
  }
  const query = /** @type {import('../http/write-query.js').WriteQuery | undefined} */ (res.locals.writeQuery);
  if (query?.columns || query?.select) {
    return new ApiError('unsupported_query', `?${query.columns ? 'columns' : 'select'} is not supported on a streamed body (NDJSON, CSV): a CSV header names its columns`);
  }
  return undefined;
}

/**
 * Reads, validates and writes one stream in one transaction; the counts once committed.
 * @param {import('../db/database.js').Database} db @param {import('./write-policy.js').WritePolicy} policy
 * @param {import('../http/stream-body.js').StreamReader} reader
 * @param {import('../http/stream-body.js').StreamFormat} format
 * @param {import('./user-schema.js').Resolution} resolution
 * @returns {Promise<{ received: number, inserted: number, updated: number }>}
 */
async function importStream(db, policy, reader, format, resolution) {
  try {
    return await (resolution === 'merge' ? importMerging(db, reader, format) : importIgnoring(db, reader, format));
  } catch (err) {
    throw await diagnosed(policy, err);
  }
}

/**
 * One transaction for a stream. BEGIN's round trip carries its settings and `then` (merge mode's
 * staging table; ignore mode makes that only when a chunk first needs it). Each COPY and the INSERT
 * at the end may rightly run for minutes: the write policy's STREAM_LIMITS.
 * @template T
 * @param {import('../db/database.js').Database} db @param {string} then
 * @param {(client: import('../db/lending.js').Lending) => Promise<T>} fn
 */
const streamTransaction = (db, then, fn) => db.transaction(fn, { limits: STREAM_LIMITS, then });

/**
 * Ignore mode: the body copied straight into users a chunk at a time (chunkedCopy), each chunk's
 * end waiting for PostgreSQL to take it.
 * @param {import('../db/database.js').Database} db
 * @param {import('../http/stream-body.js').StreamReader} reader
 * @param {import('../http/stream-body.js').StreamFormat} format
 */
function importIgnoring(db, reader, format) {
  return streamTransaction(db, '', async (client) => {
    const body = validatedBody(reader, format);
    const chunks = await chunkedCopy(client);
    try {
      let chunkStart = 0;
      for await (const csv of body.pieces(chunks.abandon)) {
        await chunks.send(csv);
        if (body.received - chunkStart >= CHUNK_ROWS) {
          await chunks.next();
          chunkStart = body.received;
        }
      }
      await chunks.send(body.end());
      return { received: body.received, inserted: await chunks.end(), updated: 0 };
    } catch (err) {
      await chunks.close();
      throw err;
    }
  });
}

/**
 * Merge mode: the whole body copied into the staging table, then written into users at its end
 * (writeMerged): an email's last line wins there, which needs all of them.
 * @param {import('../db/database.js').Database} db
 * @param {import('../http/stream-body.js').StreamReader} reader
 * @param {import('../http/stream-body.js').StreamFormat} format
 */
function importMerging(db, reader, format) {
  return streamTransaction(db, CREATE_STREAM_STAGING, async (client) => {
    const body = validatedBody(reader, format);
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
      // The COPY ended before the transaction rolls back (db.transaction).
      copy.abandon();
      await copy.finish();
      throw err;
    }
    return { received: body.received, ...(await writeMerged(client)) };
  });
}

/**
 * The body's users, parsed record by record and checked (the one schema) as they are read, as the
 * CSV that COPY takes. A problem anywhere means nothing is written: reading then goes on, without
 * sending anything, only to name up to MAX_REPORTED_ERRORS of them.
 * @param {import('../http/stream-body.js').StreamReader} reader
 * @param {import('../http/stream-body.js').StreamFormat} format
 */
function validatedBody(reader, format) {
  const parser = format === 'csv' ? createCsvParser() : createNdjsonParser();
  let received = 0;
  let invalid = 0;
  /** @type {import('../errors.js').ItemError[]} */
  const problems = [];
  let csv = '';

  /** @type {import('./stream-parse.js').OnRecord} */
  const onRecord = (item, line, duplicates) => {
    const index = received++;
    const checked = duplicates.length > 0 ? [] : checkUser(item, index, problems.length < MAX_REPORTED_ERRORS);
    if (!Array.isArray(checked)) {
      if (invalid === 0) csv += csvLine(checked);
      return;
    }
    invalid++;
    csv = '';
    const found = duplicates.length > 0
      ? duplicates.map((field) => ({ index, field, message: 'is given more than once in this object; send each field once' }))
      : /** @type {import('../errors.js').ItemError[]} */ (checked);
    for (const problem of found) if (problems.length < MAX_REPORTED_ERRORS) problems.push({ ...problem, line });
  };

  /** The refusal of an invalid body, once read (or once it has named as many problems as it may). */
  const refusal = (complete = true) =>
    new InvalidBatchError(`${complete ? '' : 'at least '}${invalid} of ${complete ? '' : 'the first '}${received} users are invalid; nothing was written`, problems);
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
     * The CSV of each piece read ('' when it ended no record). Once a user is invalid nothing more
     * comes: `onInvalid` is told after each piece (whatever was sent must be abandoned) and reading
     * goes on until the body is read or has named MAX_REPORTED_ERRORS problems.
     * @param {() => void} onInvalid
     * @returns {AsyncGenerator<string>}
     */
    async *pieces(onInvalid) {
      for await (const text of reader.texts()) {
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
      if (received === 0) throw new ApiError('empty_batch', 'the body holds no users: send at least one');
      return taken();
    },
  };
}

/**
 * Ignore mode's writer: each chunk COPYed straight into users under a savepoint, its CSV kept
 * meanwhile. A chunk that meets an email already stored, or one sent twice, fails whole: it is
 * rolled back to its savepoint and written again through the staging table (insertStaged), and so
 * is every chunk after it (a body that holds one stored email is likely a replay).
 * @param {import('../db/lending.js').Lending} client
 */
async function chunkedCopy(client) {
  /** the current chunk's CSV, until it is in users */
  const chunk = new ChunkBuffer(CHUNK_BYTES);
  let staged = false;
  let inserted = 0;
  /** @type {import('./copy-from.js').CopyInto | undefined} none while chunks are staged */
  let copy = await startCopy(client, COPY_USERS, 'chunk');

  /** The current chunk into users, through the staging table when it must be. */
  const endChunk = async () => {
    if (copy) {
      const { rows, error } = await copy.finish();
      copy = undefined;
      if (!error) {
        await client.query('RELEASE SAVEPOINT chunk');
        inserted += rows;
        chunk.clear();
        return;
      }
      if (!isUniqueViolation(error)) throw error;
      await client.query('ROLLBACK TO SAVEPOINT chunk');
    }
    inserted += await insertStaged(client, chunk.bytes(), !staged);
    staged = true;
    chunk.clear();
  };

  return {
    /**
     * Rows parsed on to COPY and into the chunk. A stored or repeated email fails the chunk, which
     * is written again at its end; any other failure is the request's, at once.
     * @param {string} csv
     */
    async send(csv) {
      // Kept as bytes, not as the string: a string built row by row is a rope that holds all its
      // pieces (several times the text) for as long as it is kept.
      if (csv !== '') {
        const bytes = chunk.append(csv);
        if (copy) await copy.write(bytes);
      }
      const failure = copy?.error();
      if (failure && !isUniqueViolation(failure)) throw failure;
    },
    /** Ends the chunk and begins the next. */
    async next() {
      await endChunk();
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
    /** The COPY in progress abandoned and ended, before the transaction rolls back (db.transaction). */
    async close() {
      copy?.abandon();
      await copy?.finish();
    },
  };
}

/**
 * Ignore mode's chunk written through the staging table: each email once (its first line), with
 * ON CONFLICT DO NOTHING; the rows inserted.
 * @param {import('../db/lending.js').Lending} client @param {Buffer} csv @param {boolean} first  the first chunk staged: the table is made
 */
async function insertStaged(client, csv, first) {
  await client.query(first ? CREATE_STREAM_STAGING : EMPTY_STREAM_STAGING);
  await copyAll(client, COPY_STREAM_STAGING, csv);
  const result = await longQuery(client, writeStatement(FIRST_OF_EACH, 'skip', 'counts'));
  return /** @type {{ inserted: number }} */ (result.rows[0]).inserted;
}

/**
 * Merge mode's staged rows into users: all as new first (the common case, and the cheapest), and
 * merged only when an email turns out to be stored already or sent twice.
 * @param {import('../db/lending.js').Lending} client
 * @returns {Promise<{ inserted: number, updated: number }>}
 */
async function writeMerged(client) {
  await client.query('SAVEPOINT all_new');
  try {
    const result = await longQuery(client, INSERT_ALL_AS_SENT);
    return { inserted: result.rowCount ?? 0, updated: 0 };
  } catch (err) {
    if (!isUniqueViolation(err)) throw err;
    await client.query('ROLLBACK TO SAVEPOINT all_new');
  }
  const result = await longQuery(client, writeStatement(MERGED_OF_EACH, 'merge', 'counts'));
  return result.rows[0];
}

/**
/**
 * A failure as the answer it gets: the request's own refusals as they are; PostgreSQL's as the
 * write policy answers a stream's (write-policy.js: never tried again, its body is gone).
 * @param {import('./write-policy.js').WritePolicy} policy @param {unknown} err
 */
async function diagnosed(policy, err) {
  if (err instanceof ApiError || err instanceof ClientGoneError) return err;
  const decision = await policy.afterFailure('stream', err);
  return 'err' in decision ? decision.err : err;
}
