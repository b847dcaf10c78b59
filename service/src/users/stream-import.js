import copyStreams from 'pg-copy-streams';
import { ApiError, InvalidBatchError, refusalOfDatabaseState } from '../errors.js';
import { sendContinue } from '../http/expect-continue.js';
import { ClientGoneError } from '../http/read-body.js';
import { checkStreamHeaders, drained, readStream, streamFormat } from '../http/stream-body.js';
import { ChunkBuffer } from './chunk-buffer.js';
import { answerWritten } from './post-users.js';
import { createCsvParser, createNdjsonParser } from './stream-parse.js';
import { MAX_REPORTED_ERRORS, checkUser } from './user-schema.js';
import { isUniqueViolation } from './user-repository.js';
import {
  COPY_STREAM_STAGING as COPY_STAGING, COPY_USERS, CREATE_STREAM_STAGING as CREATE_STAGING, EMPTY_STREAM_STAGING, FIRST_OF_EACH, INSERT_ALL_AS_SENT, MERGED_OF_EACH, csvLine, writeStatement,
} from './user-sql.js';

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
 * unfinished record (at most MAX_RECORD_CHARS), what COPY may hold ahead (COPY_AHEAD_BYTES) and
 * ignore mode's chunk (CHUNK_BYTES), with room to spare. At the default budget (3 MiB) it also lets
 * at most two large streams run at once in a process, each on a pooled connection for as long as
 * it lasts, so batches keep the rest of the pool.
 */
export const STREAM_HOLD_BYTES = 1.5 * 1024 * 1024;
// setTimeout's longest: node-postgres's client-side query timeout would otherwise end a COPY that
// rightly runs for minutes. STREAM_IDLE_TIMEOUT_MS and the database watchdog bound it instead.
const NO_QUERY_TIMEOUT = 2 ** 31 - 1;

/**
 * How far parsing may run ahead of PostgreSQL: the CSV a COPY buffers before the request waits for
 * it. With the stream's default (16 KiB) each piece read waited for the socket to PostgreSQL to
 * drain, and the two took turns instead of working at once.
 */
const COPY_AHEAD_BYTES = 256 * 1024;
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
 *   db: import('../db.js').Database,
 *   admit: import('express').RequestHandler,
 *   maxStreamBytes: number,
 *   idleTimeoutMs: number,
 *   metrics: import('../metrics.js').Metrics,
 * }} deps  admit: admission control, charging STREAM_HOLD_BYTES
 * @returns {import('express').RequestHandler}
 */
export function streamUsers({ db, admit, maxStreamBytes, idleTimeoutMs, metrics }) {
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
    importStream(db, reader, format, resolution).then(
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
 * @param {import('../db.js').Database} db
 * @param {import('../http/stream-body.js').StreamReader} reader
 * @param {import('../http/stream-body.js').StreamFormat} format
 * @param {import('./user-schema.js').Resolution} resolution
 * @returns {Promise<{ received: number, inserted: number, updated: number }>}
 */
async function importStream(db, reader, format, resolution) {
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

  try {
    const direct = resolution !== 'merge';
    // One transaction. BEGIN's round trip carries its settings and (merge mode) its staging table;
    // ignore mode makes that only when a chunk first needs it. Each COPY and the INSERT at the end
    // may rightly run for minutes: no statement timeout. DB_LOCK_TIMEOUT_MS still applies; the
    // watchdog still cuts a database that stops answering.
    return await db.transaction(async (client) => {
      /** ignore mode: the current chunk's CSV, until it is in users */
      const chunk = new ChunkBuffer(CHUNK_BYTES);
      let chunkStart = 0;
      let staged = false; // ignore mode: a chunk met a stored or repeated email, so every chunk is staged
      let inserted = 0;
      /** @type {CopyInto | undefined} ignore mode: none while chunks are staged */
      let copy = direct ? await startCopy(client, COPY_USERS, 'chunk') : await startCopy(client, COPY_STAGING);

      /** Ignore mode: the current chunk into users, through the staging table when it must be. */
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

      /** The rows parsed so far on to COPY, and into the chunk in ignore mode. */
      const send = async () => {
        if (csv === '') return;
        // Kept as bytes, not as the string: a string built row by row is a rope that holds all its
        // pieces (several times the text) for as long as it is kept.
        const bytes = direct ? chunk.append(csv) : Buffer.from(csv);
        csv = '';
        if (copy) await copy.write(bytes);
      };

      try {
        for await (const text of reader.texts()) {
          parser.feed(text, onRecord);
          if (invalid > 0) {
            // Nothing will be written: COPY is abandoned (rolled back), and reading goes on only
            // to name more of the problems.
            copy?.abandon();
            if (problems.length >= MAX_REPORTED_ERRORS) throw refusal(false);
            continue;
          }
          await send();
          // A stored or repeated email fails a chunk of ignore mode, which is written again at its
          // end; any other failure is the request's, at once.
          const failure = copy?.error();
          if (failure && !(direct && isUniqueViolation(failure))) throw failure;
          if (direct && received - chunkStart >= CHUNK_ROWS) {
            await endChunk();
            chunkStart = received;
            if (!staged) copy = await startCopy(client, COPY_USERS, 'chunk');
          }
        }
        parser.end(onRecord);
        if (invalid > 0) throw refusal();
        if (received === 0) throw new ApiError('empty_batch', 'the body holds no users: send at least one');
        await send();
        let counts;
        if (direct) {
          await endChunk();
          counts = { inserted, updated: 0 };
        } else {
          const { error } = await /** @type {CopyInto} */ (copy).finish();
          copy = undefined;
          if (error) throw error;
          counts = await writeStaged(client, resolution);
        }
        return { received, ...counts };
      } catch (err) {
        // The COPY ended before the transaction rolls back (db.transaction).
        copy?.abandon();
        await copy?.finish();
        throw err;
      }
    }, { limits: { statementTimeoutMs: 0 }, then: direct ? '' : CREATE_STAGING });
  } catch (err) {
    throw await diagnosed(db, err);
  }
}

/**
 * @typedef {object} CopyInto
 * @property {(bytes: Buffer) => Promise<void>} write  waits while COPY is behind; nothing once it failed
 * @property {() => Promise<{ rows: number, error: Error | undefined }>} finish  ends it (or its abandonment)
 * @property {() => void} abandon  a COPY that must write nothing (the transaction will roll back)
 * @property {() => Error | undefined} error  its failure so far
 */

/**
 * A COPY on the transaction's connection, under a savepoint of its own when named. Its failure is
 * kept, not thrown, for the caller to decide (ignore mode takes a unique violation in its stride).
 * @param {import('pg').PoolClient} client @param {string} sql @param {string} [savepoint]
 * @returns {Promise<CopyInto>}
 */
async function startCopy(client, sql, savepoint) {
  if (savepoint) await client.query(`SAVEPOINT ${savepoint}`);
  const copy = copyStreams.from(sql, { highWaterMark: COPY_AHEAD_BYTES });
  /** @type {{ query_timeout?: number }} */ (/** @type {unknown} */ (copy)).query_timeout = NO_QUERY_TIMEOUT;
  client.query(copy);
  /** @type {Error | undefined} */
  let error;
  // pg-copy-streams emits the server's refusal without destroying the stream, so neither 'finish'
  // nor 'close' follows it: the COPY is over when either comes, or its error.
  const over = new Promise((resolve) => {
    copy.once('close', resolve);
    copy.on('error', (err) => {
      error ??= err;
      resolve(undefined);
    });
  });
  return {
    async write(bytes) {
      if (error || copy.destroyed) return;
      if (!copy.write(bytes)) await drained(copy).catch(() => {});
    },
    async finish() {
      // Once refused, the connection has left COPY already (pg runs the next query after it).
      if (!error && !copy.destroyed && !copy.writableEnded) copy.end();
      await over;
      return { rows: copy.rowCount ?? 0, error };
    },
    abandon() {
      // CopyFail: PostgreSQL answers it with an error, which ends the COPY.
      if (!error && !copy.destroyed) copy.destroy();
    },
    error: () => error,
  };
}

/**
 * Ignore mode's chunk written through the staging table: each email once (its first line), with
 * ON CONFLICT DO NOTHING; the rows inserted.
 * @param {import('pg').PoolClient} client @param {Buffer} csv @param {boolean} first  the first chunk staged: the table is made
 */
async function insertStaged(client, csv, first) {
  await client.query(first ? CREATE_STAGING : EMPTY_STREAM_STAGING);
  const copy = await startCopy(client, COPY_STAGING);
  await copy.write(csv);
  const { error } = await copy.finish();
  if (error) throw error;
  const result = await longQuery(client, writeStatement(FIRST_OF_EACH, 'skip', 'counts'));
  return /** @type {{ inserted: number }} */ (result.rows[0]).inserted;
}

/**
 * Merge mode's staged rows into users: all as new first (the common case, and the cheapest), and with the
 * request's resolution only when an email turns out to be stored already or sent twice.
 * @param {import('pg').PoolClient} client
 * @param {import('./user-schema.js').Resolution} resolution
 * @returns {Promise<{ inserted: number, updated: number }>}
 */
async function writeStaged(client, resolution) {
  await client.query('SAVEPOINT all_new');
  try {
    const result = await longQuery(client, INSERT_ALL_AS_SENT);
    return { inserted: result.rowCount ?? 0, updated: 0 };
  } catch (err) {
    if (!isUniqueViolation(err)) throw err;
    await client.query('ROLLBACK TO SAVEPOINT all_new');
  }
  const merge = resolution === 'merge';
  const result = await longQuery(client, writeStatement(merge ? MERGED_OF_EACH : FIRST_OF_EACH, merge ? 'merge' : 'skip', 'counts'));
  return result.rows[0];
}

/**
 * A statement without node-postgres's client-side timeout (pg's types do not declare the option).
 * @param {import('pg').PoolClient} client @param {string} text
 */
const longQuery = (client, text) => client.query(/** @type {import('pg').QueryConfig} */ (/** @type {unknown} */ ({ text, query_timeout: NO_QUERY_TIMEOUT })));

/**
 * A failure as the answer it gets: the request's own refusals as they are; the database's state as
 * 503 (db.diagnose). A stream is never tried again: its body is gone.
 * @param {import('../db.js').Database} db @param {unknown} err
 */
async function diagnosed(db, err) {
  if (err instanceof ApiError || err instanceof ClientGoneError) return err;
  const diagnosis = await db.diagnose(err);
  // A passing failure is unavailable too: the body it would be tried again with is gone.
  return refusalOfDatabaseState(diagnosis === 'transient' ? 'unavailable' : diagnosis, err) ?? err;
}
