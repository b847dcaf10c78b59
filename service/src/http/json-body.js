import { isUtf8 } from 'node:buffer';
import zlib from 'node:zlib';
import { ApiError, InvalidBatchError } from '../errors.js';
import { sendContinue } from './expect-continue.js';
import { findDuplicateKeys } from '../json-keys.js';
import { parseMediaType } from './media-type.js';
import { chargeRefused } from './rate-limit.js';
import { ClientGoneError, readBody } from './read-body.js';
import { repeatedHeaders } from './repeated-headers.js';

/** @typedef {import('node:http').IncomingMessage} IncomingMessage */
/** @typedef {import('node:stream').Transform} Transform */

// Reads a JSON body strictly: what is parsed is exactly what was sent, or a refusal naming the
// problem. Headers are checked before a byte is read, so a wrong type or size costs nothing.

// RFC 9659's cap on a zstd window; zstd's own would let a frame's header take far more memory.
const ZSTD_WINDOW_LOG_MAX = 23;

/** Others are 415. @type {Record<string, () => Transform>} */
const DECODERS = {
  gzip: zlib.createGunzip,
  'x-gzip': zlib.createGunzip,
  deflate: zlib.createInflate,
  br: zlib.createBrotliDecompress,
  /* eslint-disable n/no-unsupported-features/node-builtins -- looked for before it is used */
  ...(typeof zlib.createZstdDecompress === 'function' && {
    zstd: () =>
      zlib.createZstdDecompress({
        params: { [zlib.constants.ZSTD_d_windowLogMax]: ZSTD_WINDOW_LOG_MAX },
      }),
  }),
  /* eslint-enable n/no-unsupported-features/node-builtins */
};
const CODINGS_TAKEN = Object.keys(DECODERS)
  .filter((c) => c !== 'x-gzip')
  .join(', ');
const UTF8_BOM = Buffer.from([0xef, 0xbb, 0xbf]);

/** @typedef {{ error: ApiError } | { decoder: (() => Transform) | null }} HeaderCheck */

/** @param {IncomingMessage} req @param {number} maxBodyBytes @returns {HeaderCheck} */
export function checkJsonHeaders(req, maxBodyBytes) {
  const [repeated] = repeatedHeaders(req, ['content-type']);
  if (repeated)
    return {
      error: new ApiError('duplicate_header', 'Content-Type is given more than once; send it once'),
    };

  const header = req.headers['content-type'];
  if (!header)
    return {
      error: new ApiError(
        'unsupported_media_type',
        'Content-Type must be application/json (it is missing)',
      ),
    };
  // What nearly every client sends, and nothing else about the request unusual: no parsing.
  if (
    COMMON_TYPES.has(header) &&
    req.headers['transfer-encoding'] === undefined &&
    req.headers['content-encoding'] === undefined
  ) {
    return withinLimit(req, maxBodyBytes) ?? PLAIN_BODY;
  }
  const type = parseMediaType(header);
  if (!type)
    return {
      error: new ApiError(
        'unsupported_media_type',
        'Content-Type is malformed (RFC 9110); send application/json',
      ),
    };
  if (type.type !== 'application/json') {
    return {
      error: new ApiError(
        'unsupported_media_type',
        'Content-Type must be application/json (an array of users), or ' +
          'application/x-ndjson, application/jsonl or text/csv (a stream of them)',
      ),
    };
  }
  const charset = type.parameters.get('charset')?.toLowerCase();
  if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
    return {
      error: new ApiError(
        'unsupported_charset',
        `charset ${charset} is not supported: the body ` +
          `must be UTF-8 (send charset=utf-8 or no charset)`,
      ),
    };
  }

  return checkCodings(req, maxBodyBytes);
}

/**
 * @param {IncomingMessage} req @param {number} limit @param {string} [limitName]
 * @returns {HeaderCheck}
 */
export function checkCodings(req, limit, limitName = 'MAX_BODY_BYTES') {
  // Node decodes chunked alone; RFC 9112 (6.1) answers a transfer coding not understood with 501.
  const transfer = (req.headers['transfer-encoding'] ?? '')
    .split(',')
    .map((c) => c.trim().toLowerCase());
  const unknownTransfer = transfer.find((c) => c !== '' && c !== 'chunked');
  if (unknownTransfer !== undefined) {
    return {
      error: new ApiError(
        'unsupported_transfer_encoding',
        `Transfer-Encoding ${unknownTransfer} is not supported; ` +
          `send chunked alone (compress with Content-Encoding)`,
      ),
    };
  }

  const codings = (req.headers['content-encoding'] ?? '')
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  if (codings.length > 1) {
    return {
      error: new ApiError(
        'unsupported_encoding',
        `Content-Encoding ${codings.join(', ')} stacks ` +
          `encodings; send one of ${CODINGS_TAKEN}, or none`,
      ),
    };
  }
  const coding = codings[0];
  if (coding !== undefined && !Object.hasOwn(DECODERS, coding)) {
    return {
      error: new ApiError(
        'unsupported_encoding',
        `Content-Encoding ${coding} is not supported; send one of ${CODINGS_TAKEN}, or none`,
      ),
    };
  }

  return (
    withinLimit(req, limit, limitName) ?? {
      decoder: coding === undefined ? null : DECODERS[coding],
    }
  );
}

const COMMON_TYPES = new Set([
  'application/json',
  'application/json; charset=utf-8',
  'application/json;charset=utf-8',
  'application/json; charset=UTF-8',
]);
const PLAIN_BODY = Object.freeze({ decoder: null });

/**
 * Node refused a malformed Content-Length already.
 * @param {IncomingMessage} req @param {number} maxBodyBytes @param {string} [limitName]
 */
function withinLimit(req, maxBodyBytes, limitName = 'MAX_BODY_BYTES') {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared <= maxBodyBytes) return undefined;
  return {
    error: new ApiError(
      'payload_too_large',
      `Content-Length ${declared} is over ${limitName} (${maxBodyBytes})`,
    ),
  };
}

/**
 * `onItemDuplicates`: told of the users that give a key twice instead of refusing them.
 * @param {Buffer} buffer @returns {unknown}
 * @param {(errors: import('../errors.js').ItemError[]) => void} [onItemDuplicates]
 */
export function parseJsonBody(buffer, onItemDuplicates) {
  // Decoding would replace bad bytes with U+FFFD, which would then be stored as if sent.
  if (!isUtf8(buffer)) throw new ApiError('invalid_utf8');
  // A byte-order mark is no part of the JSON text (RFC 8259 lets a parser ignore it).
  const start = buffer.subarray(0, 3).equals(UTF8_BOM) ? 3 : 0;
  const text = buffer.toString('utf8', start);
  if (text === '') return undefined;

  let value;
  try {
    value = JSON.parse(text);
  } catch {
    throw new ApiError('malformed_json');
  }

  const duplicates = findDuplicateKeys(text, value);
  if (duplicates.length === 0) return value;
  if (duplicates.every((d) => d.index !== null)) {
    const errors = duplicates.map((d) => ({
      index: /** @type {number} */ (d.index),
      field: d.key,
      message: 'is given more than once in this object; send each field once',
    }));
    if (onItemDuplicates) {
      onItemDuplicates(errors);
      return value;
    }
    const items = new Set(errors.map((e) => e.index)).size;
    throw new InvalidBatchError(
      `${items} of the users have a field given twice; nothing was written`,
      errors,
    );
  }
  throw new ApiError(
    'duplicate_key',
    `the key ${JSON.stringify(duplicates[0].key)} is given ` +
      `more than once in one object; send each key once`,
  );
}

/**
 * @param {{ maxBodyBytes: number, bodyReadTimeoutMs: number }} options
 * @returns {import('express').RequestHandler}
 */
export function readJsonBody({ maxBodyBytes, bodyReadTimeoutMs }) {
  return (req, res, next) => {
    const checked = checkJsonHeaders(req, maxBodyBytes);
    if ('error' in checked) return next(checked.error);
    sendContinue(res);

    const decoder = checked.decoder?.();
    if (decoder) req.pipe(decoder);
    /** @type {import('node:stream').Readable} */
    const source = decoder ?? req;

    /** @param {unknown} err @param {Buffer | undefined} buffer @param {number} bytes */
    const settle = (err, buffer, bytes) => {
      clearTimeout(timer);
      res.locals.bodyBytes = bytes;
      if (decoder) {
        req.unpipe(decoder);
        decoder.destroy();
      }
      // The client went away mid-body: nobody is left to answer, what it sent is charged still.
      if (err instanceof ClientGoneError) {
        chargeRefused(res);
        return req.socket.destroy();
      }
      if (err) return next(describeReadError(err, decoder !== undefined));
      if (decoder) req.resume(); // anything after the compressed stream, so the request ends
      takeBody(req, res, /** @type {Buffer} */ (buffer), next);
    };

    const timer = setTimeout(() => {
      const bytes = stop();
      settle(bodyTimeout(bodyReadTimeoutMs), undefined, bytes);
    }, bodyReadTimeoutMs);
    const declared = req.headers['content-length'];
    const allowance = res.locals.bodyAllowance;
    const stop = readBody(
      req,
      source,
      {
        limit: maxBodyBytes,
        length: declared === undefined ? undefined : Number(declared),
        allowance,
      },
      settle,
    );
  };
}

/**
 * @param {import('express').Request} req @param {import('express').Response} res
 * @param {Buffer} buffer @param {import('express').NextFunction} next
 */
function takeBody(req, res, buffer, next) {
  // An Idempotency-Key's fingerprint is of the body as sent (decoded), whatever it parses to.
  res.locals.idempotency?.hash.update(buffer);
  try {
    const setAside = res.locals.write?.invalid
      ? (/** @type {import('../errors.js').ItemError[]} */ errors) =>
          (res.locals.duplicateKeys = errors)
      : undefined;
    req.body = parseJsonBody(buffer, setAside);
  } catch (parseError) {
    return next(parseError);
  }
  next();
}

/** @param {number} bodyReadTimeoutMs */
const bodyTimeout = (bodyReadTimeoutMs) =>
  new ApiError(
    'body_timeout',
    `the body did not arrive within BODY_READ_TIMEOUT_MS ` +
      `(${bodyReadTimeoutMs} ms); nothing was written`,
  );

/** A decoder's failure is malformed_encoding. @param {unknown} err @param {boolean} compressed */
function describeReadError(err, compressed) {
  if (err instanceof ApiError) return err;
  return compressed ? new ApiError('malformed_encoding') : err;
}
