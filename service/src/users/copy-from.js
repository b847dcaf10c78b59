import copyStreams from 'pg-copy-streams';
import { drained } from '../http/stream-body.js';

// A COPY ... FROM STDIN on a transaction's connection, written with backpressure: the one way a
// streamed body (stream-import.js) sends its rows to PostgreSQL.

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
 * @typedef {object} CopyInto
 * @property {(bytes: Buffer) => Promise<void>} write  waits while COPY is behind; nothing once it failed
 * @property {() => Promise<{ rows: number, error: Error | undefined }>} finish  ends it (or its abandonment)
 * @property {() => void} abandon  a COPY that must write nothing (the transaction will roll back)
 * @property {() => Error | undefined} error  its failure so far
 */

/**
 * A COPY on the transaction's connection, under a savepoint of its own when named. Its failure is
 * kept, not thrown, for the caller to decide (ignore mode takes a unique violation in its stride).
 * @param {import('../db/lending.js').Lending} client @param {string} sql @param {string} [savepoint]
 * @returns {Promise<CopyInto>}
 */
export async function startCopy(client, sql, savepoint) {
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
 * A COPY that writes all of `bytes` and is then over; its failure thrown. The rows it wrote.
 * @param {import('../db/lending.js').Lending} client @param {string} sql @param {Buffer} bytes
 */
export async function copyAll(client, sql, bytes) {
  const copy = await startCopy(client, sql);
  await copy.write(bytes);
  const { rows, error } = await copy.finish();
  if (error) throw error;
  return rows;
}

/**
 * A statement without node-postgres's client-side timeout (pg's types do not declare the option).
 * @param {import('../db/lending.js').Lending} client @param {string} text
 */
export const longQuery = (client, text) => client.query(/** @type {import('pg').QueryConfig} */ (/** @type {unknown} */ ({ text, query_timeout: NO_QUERY_TIMEOUT })));
