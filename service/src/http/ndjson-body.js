import { isUtf8 } from 'node:buffer';
import { ApiError } from '../errors.js';
import { checkCodings } from './json-body.js';
import { readBody } from './read-body.js';
import { createNdjsonParser } from '../users/stream-parse.js';

// A small NDJSON body (an object a line, as POST /erasures takes it), read whole within
// MAX_BODY_BYTES like a JSON array, into an array: a line that is not JSON is named.

/**
 * @param {{ maxBodyBytes: number }} options
 * @returns {(req: import('express').Request, res: import('express').Response,
 *   next: (err?: unknown) => void) => void}
 */
export function readNdjsonBody({ maxBodyBytes }) {
  return (req, res, next) => {
    const checked = checkCodings(req, maxBodyBytes);
    if ('error' in checked) return next(checked.error);
    const decoder = checked.decoder?.();
    if (decoder) req.pipe(decoder);
    const declared = req.headers['content-length'];
    const length = decoder || declared === undefined ? undefined : Number(declared);
    const options = { limit: maxBodyBytes, length, allowance: res.locals.bodyAllowance };
    readBody(req, decoder ?? req, options, (err, buffer) => {
      if (err) return next(err);
      res.locals.idempotency?.hash.update(/** @type {Buffer} */ (buffer));
      try {
        req.body = parseLines(/** @type {Buffer} */ (buffer));
      } catch (parseError) {
        return next(parseError);
      }
      next();
    });
  };
}

/**
 * The lines as the streamed import parses them (a byte-order mark, CRLF, blank lines); a key given
 * twice in one object is refused. @param {Buffer} buffer @returns {unknown[]}
 */
function parseLines(buffer) {
  if (!isUtf8(buffer)) throw new ApiError('invalid_utf8');
  /** @type {unknown[]} */
  const items = [];
  /** @type {import('../users/stream-types.js').OnRecord} */
  const onRecord = (item, line, duplicates) => {
    if (duplicates.length > 0)
      throw new ApiError(
        'duplicate_key',
        `line ${line} gives ${JSON.stringify(duplicates[0])} more than once; send each key once`,
      );
    items.push(item);
  };
  const parser = createNdjsonParser();
  parser.feed(buffer.toString('utf8'), onRecord);
  parser.end(onRecord);
  return items;
}
