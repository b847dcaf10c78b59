import { isUtf8 } from 'node:buffer';
import { ApiError } from '../errors.js';
import { checkCodings } from './json-body.js';
import { readBody } from './read-body.js';

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

/** @param {Buffer} buffer @returns {unknown[]} */
function parseLines(buffer) {
  if (!isUtf8(buffer)) throw new ApiError('invalid_utf8');
  const items = [];
  const lines = buffer.toString('utf8').split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (line === '') continue;
    try {
      items.push(JSON.parse(line));
    } catch {
      throw new ApiError('malformed_json', `line ${i + 1} is not valid JSON`);
    }
  }
  return items;
}
