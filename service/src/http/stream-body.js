import { ApiError } from '../errors.js';
import { checkCodings } from './json-body.js';
import { parseMediaType } from './media-type.js';
import { ClientGoneError } from './read-body.js';
import { repeatedHeaders } from './repeated-headers.js';

/** @typedef {import('node:http').IncomingMessage} IncomingMessage */
/** @typedef {import('node:stream').Transform} Transform */

// Never whole: the text handed out as it comes, the request paused while the consumer is busy.

/**
 * @param {IncomingMessage} req @param {number} maxStreamBytes
 * @returns {import('./json-body.js').HeaderCheck}
 */
export function checkStreamHeaders(req, maxStreamBytes) {
  const [repeated] = repeatedHeaders(req, ['content-type']);
  if (repeated)
    return {
      error: new ApiError('duplicate_header', 'Content-Type is given more than once; send it once'),
    };
  const charset = parseMediaType(/** @type {string} */ (req.headers['content-type']))
    ?.parameters.get('charset')
    ?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    return {
      error: new ApiError(
        'unsupported_charset',
        `charset ${charset} is not supported: the body ` +
          `must be UTF-8 (send charset=utf-8 or no charset)`,
      ),
    };
  }
  return checkCodings(req, maxStreamBytes, 'MAX_STREAM_BYTES');
}

/**
 * texts: checked UTF-8, or an ApiError or ClientGoneError; close: the rest stays unread.
 * @typedef {{ texts: () => AsyncGenerator<string>, bytes: () => number,
 *   close: () => void }} StreamReader
 */

/**
 * @param {IncomingMessage} req @returns {StreamReader}
 * @param {{ decoder: (() => Transform) | null, maxStreamBytes: number,
 *   idleTimeoutMs: number }} options
 */
export function readStream(req, { decoder: makeDecoder, maxStreamBytes, idleTimeoutMs }) {
  const decoder = makeDecoder?.();
  if (decoder) req.pipe(decoder);
  /** @type {import('node:stream').Readable} */
  const source = decoder ?? req;
  let read = 0;
  /** @type {AsyncIterator<Buffer> | undefined} */
  let chunks = undefined;
  const { fail, next: nextChunk, stop: stopWatching } = watchFailures(req, decoder);

  const idle = idleTimer(() => fail(idleTimeout(idleTimeoutMs)), idleTimeoutMs);

  function close() {
    idle.clear();
    stopWatching();
    // The iterator's listeners off: one left would keep unread-body.js from resuming the request.
    chunks?.return?.().catch(() => {});
    if (decoder) {
      req.unpipe(decoder);
      decoder.destroy();
    }
    source.pause();
  }

  return {
    bytes: () => read,
    close,
    async *texts() {
      const utf8 = new TextDecoder('utf-8', { fatal: true });
      const iterator = source.iterator({ destroyOnReturn: false });
      chunks = iterator;
      for (;;) {
        /** @type {IteratorResult<Buffer>} */
        let next;
        // Timed only while waiting for the client: not while the consumer (COPY) is behind.
        idle.arm();
        try {
          next = await nextChunk(iterator);
        } catch (err) {
          throw readFailure(err, req, decoder);
        } finally {
          idle.clear();
        }
        if (next.done) break;
        const chunk = next.value;
        read += chunk.length;
        if (read > maxStreamBytes) throw tooLarge(maxStreamBytes);
        yield decodeUtf8(utf8, chunk, true);
      }
      const last = decodeUtf8(utf8, undefined, false);
      if (last !== '') yield last;
    },
  };
}

/** @param {() => void} onIdle @param {number} ms */
function idleTimer(onIdle, ms) {
  /** @type {NodeJS.Timeout | undefined} */
  let timer = undefined;
  return {
    arm() {
      clearTimeout(timer);
      timer = setTimeout(onIdle, ms);
    },
    clear() {
      clearTimeout(timer);
    },
  };
}

/** @param {unknown} err @param {IncomingMessage} req @param {Transform | undefined} decoder */
function readFailure(err, req, decoder) {
  if (err instanceof ApiError || err instanceof ClientGoneError) return err;
  if (decoder) return new ApiError('malformed_encoding');
  return !req.complete ? new ClientGoneError() : err;
}

/** @param {number} idleTimeoutMs */
const idleTimeout = (idleTimeoutMs) =>
  new ApiError(
    'body_timeout',
    `no part of the body arrived for STREAM_IDLE_TIMEOUT_MS ` +
      `(${idleTimeoutMs} ms); nothing was written`,
  );

/** @param {number} maxStreamBytes */
const tooLarge = (maxStreamBytes) =>
  new ApiError(
    'payload_too_large',
    `the body is larger than MAX_STREAM_BYTES (${maxStreamBytes}); nothing was written`,
  );

/**
 * The first failure of a stream, which ends the wait for a chunk; not a Promise.race a read, whose
 * reactions would keep every chunk alive (nodejs/node#17469).
 * @param {IncomingMessage} req @param {Transform | undefined} decoder
 */
function watchFailures(req, decoder) {
  /** @type {{ err: unknown } | undefined} */
  let failure = undefined;
  /** @type {((err: unknown) => void) | undefined} */
  let interruptRead = undefined;
  /** @param {unknown} err */
  const fail = (err) => {
    failure ??= { err };
    interruptRead?.(failure.err);
  };
  const onClose = () => {
    if (!req.complete) fail(new ClientGoneError());
  };
  /** @param {unknown} err */
  const onRequestError = (err) => fail(req.complete ? err : new ClientGoneError());
  req.on('close', onClose);
  if (decoder) req.on('error', onRequestError);
  // The decoder may fail before anything reads from it (the transaction is opened first).
  decoder?.on('error', () => fail(new ApiError('malformed_encoding')));
  return {
    fail,
    /** @param {AsyncIterator<Buffer>} iterator @returns {Promise<IteratorResult<Buffer>>} */
    async next(iterator) {
      if (failure) throw failure.err;
      try {
        return await new Promise((resolve, reject) => {
          interruptRead = reject;
          iterator.next().then(resolve, reject);
        });
      } finally {
        interruptRead = undefined;
      }
    },
    stop() {
      req.off('close', onClose);
      req.off('error', onRequestError);
    },
  };
}

/**
 * Strict: a replacement U+FFFD would be stored as if sent.
 * @param {TextDecoder} utf8 @param {Buffer | undefined} chunk @param {boolean} more
 */
function decodeUtf8(utf8, chunk, more) {
  try {
    return utf8.decode(chunk, { stream: more });
  } catch {
    throw new ApiError('invalid_utf8');
  }
}
