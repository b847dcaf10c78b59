import copyStreams from 'pg-copy-streams';

// A COPY ... FROM STDIN on a transaction's connection, written with backpressure: the one way a
// streamed import (stream-import.js) sends its rows to PostgreSQL.

// setTimeout's longest: pg's client-side query timeout would end a COPY that rightly runs for
// minutes; STREAM_IDLE_TIMEOUT_MS and the database watchdog bound it instead.
const NO_QUERY_TIMEOUT = 2 ** 31 - 1;
/** The CSV a COPY buffers before the import waits: parsing and PostgreSQL work at once. */
const COPY_AHEAD_BYTES = 256 * 1024;

/** @import { CopyInto, Lending } from './stream-types.js' */

/**
 * A COPY, under a savepoint when named; its failure kept for the caller. @param {Lending} client
 * @param {string} sql @param {string} [savepoint] @returns {Promise<CopyInto>}
 */
export async function startCopy(client, sql, savepoint) {
  if (savepoint) await client.query(`SAVEPOINT ${savepoint}`);
  const copy = copyStreams.from(sql, { highWaterMark: COPY_AHEAD_BYTES });
  /** @type {{ query_timeout?: number }} */ (/** @type {unknown} */ (copy)).query_timeout =
    NO_QUERY_TIMEOUT;
  client.query(copy);
  /** @type {Error | undefined} */
  let error = undefined;
  // pg-copy-streams emits the server's refusal without a 'close': over at 'close' or the error.
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
 * A COPY of all of `bytes`, its failure thrown; the rows it wrote.
 * @param {Lending} client @param {string} sql @param {Buffer} bytes
 */
export async function copyAll(client, sql, bytes) {
  const copy = await startCopy(client, sql);
  await copy.write(bytes);
  const { rows, error } = await copy.finish();
  if (error) throw error;
  return rows;
}

/** A statement without pg's client-side timeout. @param {Lending} client @param {string} text */
export const longQuery = (client, text) =>
  client.query(
    /** @type {import('pg').QueryConfig} */ (
      /** @type {unknown} */ ({ text, query_timeout: NO_QUERY_TIMEOUT })
    ),
  );

/** Rejects if it fails or closes first. @param {import('node:stream').Writable} writable */
function drained(writable) {
  return new Promise((resolve, reject) => {
    const onDrain = () => {
      writable.off('error', onError);
      writable.off('close', onClose);
      resolve(undefined);
    };
    /** @param {Error} err */
    const onError = (err) => {
      writable.off('drain', onDrain);
      writable.off('close', onClose);
      reject(err);
    };
    const onClose = () => onError(new Error('the COPY stream closed before it drained'));
    writable.once('drain', onDrain);
    writable.once('error', onError);
    writable.once('close', onClose);
  });
}
