import copyStreams from 'pg-copy-streams';
import { ApiError, InvalidBatchError, refusalOfDatabaseState } from '../errors.js';
import { sendContinue } from '../http/expect-continue.js';
import { ClientGoneError } from '../http/read-body.js';
import { checkStreamHeaders, drained, readStream, streamFormat } from '../http/stream-body.js';
import { answerWritten } from './post-users.js';
import { createCsvParser, createNdjsonParser } from './stream-parse.js';
import { MAX_REPORTED_ERRORS, checkUser } from './user-schema.js';
import { isUniqueViolation } from './user-repository.js';
import { COLUMNS, csvField, writeStatement } from './user-sql.js';

// POST /users with a streamed body (NDJSON or CSV) of any size, written as it arrives and all or
// nothing: one transaction on one connection; each record is validated (the one schema) and sent
// on through COPY into a temporary staging table; at the end of the body the staged rows go into
// users with the request's resolution, and the transaction commits. A problem anywhere rolls it all
// back: an invalid user (reading then goes on, without writing, to name up to 100 of them), a
// malformed line, a client that leaves, the database. Memory does not grow with the body: while
// COPY is behind, the request is not read.

/**
 * What a stream holds at once, charged to admission control whatever the body's size: the socket's
 * and the decoder's buffers, one piece of text and its CSV for COPY (both about a 64 KiB read),
 * the unfinished record (at most MAX_RECORD_CHARS) and COPY's own buffer, with room to spare. At
 * the default budget (3 MiB) it also lets at most two large streams run at once in a process, each
 * on a pooled connection for as long as it lasts, so batches keep the rest of the pool.
 */
export const STREAM_HOLD_BYTES = 1024 * 1024;
// setTimeout's longest: node-postgres's client-side query timeout would otherwise end a COPY that
// rightly runs for minutes. STREAM_IDLE_TIMEOUT_MS and the database watchdog bound it instead.
const NO_QUERY_TIMEOUT = 2 ** 31 - 1;

const STAGING = 'users_stream';
// `ord` keeps the order the users were sent, which decides which of an email's lines wins. COLLATE
// "C" as in users: the sort and the grouping by email compare bytes, not through ICU.
const CREATE_STAGING = `CREATE TEMPORARY TABLE ${STAGING} (ord bigint, email text COLLATE "C", name text, phone text, password_hash text) ON COMMIT DROP`;
const COPY_SQL = `COPY ${STAGING} (ord, ${COLUMNS}) FROM STDIN (FORMAT csv)`;
// Every email once, sorted (concurrent writers lock rows in one order): ignore keeps an email's
// first line; merge its last name, and its last phone and hash sent (as parseUserBatch merges).
const FIRST_OF_EACH = `SELECT DISTINCT ON (email) ${COLUMNS} FROM ${STAGING} ORDER BY email, ord`;
const MERGED_OF_EACH = `SELECT email, (array_agg(name ORDER BY ord DESC))[1],
  (array_agg(phone ORDER BY ord DESC) FILTER (WHERE phone IS NOT NULL))[1],
  (array_agg(password_hash ORDER BY ord DESC) FILTER (WHERE password_hash IS NOT NULL))[1]
  FROM ${STAGING} GROUP BY email ORDER BY email`;
const ALL_AS_SENT = `SELECT ${COLUMNS} FROM ${STAGING} ORDER BY email`;

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
    if (typeof checked[0] === 'string') {
      const row = /** @type {import('./user-schema.js').UserRow} */ (checked);
      if (invalid === 0) csv += `${index},${csvField(row[0])},${csvField(row[1])},${csvField(row[2])},${csvField(row[3])}\n`;
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
    return await db.withClient(async (client) => {
      await client.query('BEGIN');
      // One COPY for the whole body, and one INSERT from it at the end: each may rightly run for
      // minutes. DB_LOCK_TIMEOUT_MS still applies; the watchdog still cuts a database that stops answering.
      await client.query('SET LOCAL statement_timeout = 0');
      await client.query(CREATE_STAGING);
      const copy = copyStreams.from(COPY_SQL);
      /** @type {{ query_timeout?: number }} */ (/** @type {unknown} */ (copy)).query_timeout = NO_QUERY_TIMEOUT;
      client.query(copy);
      /** @type {Error | undefined} */
      let copyError;
      copy.on('error', (err) => {
        copyError ??= err;
      });
      const copyClosed = new Promise((resolve) => copy.once('close', resolve));
      try {
        for await (const text of reader.texts()) {
          parser.feed(text, onRecord);
          // Once abandoned, COPY's failure is the one asked for (CopyFail), not the request's.
          if (copyError && invalid === 0) throw copyError;
          if (invalid > 0) {
            // Nothing will be written: COPY is abandoned (rolled back), and reading goes on only
            // to name more of the problems.
            if (!copy.destroyed) copy.destroy();
            if (problems.length >= MAX_REPORTED_ERRORS) throw refusal(false);
            continue;
          }
          if (csv !== '') {
            const more = copy.write(csv);
            csv = '';
            if (!more) await drained(copy);
          }
        }
        parser.end(onRecord);
        if (invalid > 0) throw refusal();
        if (received === 0) throw new ApiError('empty_batch', 'the body holds no users: send at least one');
        if (csv !== '') copy.write(csv);
        csv = '';
        copy.end();
        await copyClosed;
        if (copyError) throw copyError;
        const counts = await writeStaged(client, resolution);
        await client.query('COMMIT');
        return { received, ...counts };
      } catch (err) {
        if (!copy.destroyed) copy.destroy();
        await copyClosed;
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      }
    });
  } catch (err) {
    throw await diagnosed(db, err);
  }
}

/**
 * The staged rows into users: all as new first (the common case, and the cheapest), and with the
 * request's resolution only when an email turns out to be stored already or sent twice.
 * @param {import('pg').PoolClient} client
 * @param {import('./user-schema.js').Resolution} resolution
 * @returns {Promise<{ inserted: number, updated: number }>}
 */
async function writeStaged(client, resolution) {
  await client.query('SAVEPOINT all_new');
  try {
    const result = await longQuery(client, `INSERT INTO users (${COLUMNS}) ${ALL_AS_SENT}`);
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
