import { ApiError } from '../errors.js';
import { errorCode } from '../error-code.js';

// Chunks smaller than this are copied into a shared block instead of kept as they came.
const SMALL_CHUNK = 4 * 1024;
const BLOCK = 16 * 1024;

export class ClientGoneError extends Error {
  constructor() {
    super('the client closed the connection before its body was complete');
    this.name = 'ClientGoneError';
  }
}

/**
 * Into one Buffer, memory bounded by the body's size however it is framed.
 * @param {import('node:http').IncomingMessage} req
 * @param {import('node:stream').Readable} source the request or its decoder
 * @param {{ limit: number, length?: number,
 *   allowance?: import('./admission.js').BodyAllowance }} options
 * @param {(err: unknown, body: Buffer | undefined, bytes: number) => void} callback called once
 * @returns {() => number}  stops reading, without the callback; the bytes kept
 */
export function readBody(req, source, { limit, length, allowance }, callback) {
  const known = length !== undefined && source === req;
  const kept = keptBody(known ? length : undefined);
  let received = 0;
  let done = false;

  /** @param {Buffer} chunk */
  function onData(chunk) {
    const next = received + chunk.length;
    const refused = allowance?.(next);
    if (refused) return finish(refused);
    if (next > limit) return finish(new ApiError('payload_too_large'));
    if (known && next > /** @type {number} */ (length)) return finish(lengthMismatch());
    kept.add(chunk, received);
    received = next;
  }

  function onEnd() {
    if (known && received !== length) return finish(lengthMismatch());
    finish(undefined, kept.body(received));
  }

  /** @param {unknown} err */
  const onError = (err) =>
    finish(!req.complete && errorCode(err) === 'ECONNRESET' ? new ClientGoneError() : err);
  const onClose = () => {
    if (!req.complete) finish(new ClientGoneError());
  };

  function stop() {
    done = true;
    source.off('data', onData);
    source.off('end', onEnd);
    source.off('error', onError);
    if (source !== req) req.off('error', onError);
    req.off('close', onClose);
    source.pause();
    return received;
  }

  /** @param {unknown} err @param {Buffer} [body] */
  function finish(err, body) {
    if (done) return;
    stop();
    kept.release();
    callback(err, body, received);
  }

  source.on('data', onData);
  source.on('end', onEnd);
  source.on('error', onError);
  if (source !== req) req.on('error', onError);
  req.on('close', onClose);
  return stop;
}

const lengthMismatch = () =>
  new ApiError(
    'bad_request',
    'the body does not match its Content-Length; nothing was read or written',
  );

/** Where a body's chunks are kept. @param {number | undefined} length  when known */
function keptBody(length) {
  /** @type {Buffer[]} */
  const parts = [];
  /** @type {Buffer | undefined} */
  let block = undefined;
  let blockUsed = 0;

  function sealBlock() {
    if (block === undefined || blockUsed === 0) return;
    parts.push(block.subarray(0, blockUsed));
    block = undefined;
    blockUsed = 0;
  }

  return {
    /** @param {Buffer} chunk @param {number} at  the bytes kept before it */
    add(chunk, at) {
      if (length !== undefined) {
        block ??= Buffer.allocUnsafe(length);
        chunk.copy(block, at);
      } else if (chunk.length >= SMALL_CHUNK) {
        sealBlock();
        parts.push(chunk);
      } else {
        if (block === undefined || blockUsed + chunk.length > block.length) {
          sealBlock();
          block = Buffer.allocUnsafe(BLOCK);
        }
        chunk.copy(block, blockUsed);
        blockUsed += chunk.length;
      }
    },
    /** @param {number} size */
    body(size) {
      if (length !== undefined) return block ?? Buffer.alloc(0);
      sealBlock();
      return parts.length === 1 ? parts[0] : Buffer.concat(parts, size);
    },
    release() {
      parts.length = 0;
    },
  };
}
