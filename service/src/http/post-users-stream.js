import { ApiError } from '../errors.js';
import { answerWritten, renderingOf } from './answer.js';
import { sendContinue } from './expect-continue.js';
import { replayTaken } from './idempotency-key.js';
import { quarantineOf } from './quarantine-request.js';
import { chargeRefused } from './rate-limit.js';
import { ClientGoneError } from './read-body.js';
import { checkStreamHeaders, readStream } from './stream-body.js';

// POST /users with a streamed body (NDJSON, CSV): its headers checked, admitted for what it holds
// at once, `100 Continue` sent, its text read piece by piece into the import
// (users/stream-import.js) and answered from what it wrote (with an Idempotency-Key: the outcome
// stored with the import, or the one stored under the key replayed). A client gone mid-body gets
// no answer: its socket is destroyed.

/** The media types of a stream, by the format of its records (byContentType's routes). */
export const STREAM_TYPES = Object.freeze({
  'application/x-ndjson': 'ndjson',
  'application/jsonl': 'ndjson',
  'text/csv': 'csv',
});

/**
 * @typedef {{ format: import('../users/stream-types.js').StreamFormat,
 *   importUsers: ReturnType<typeof import('../users/stream-import.js').createStreamImport>,
 *   admit: import('express').RequestHandler, maxStreamBytes: number, idleTimeoutMs: number,
 *   quarantineBound: import('../users/quarantine-types.js').ClientBound,
 *   metrics: import('../metrics.js').Metrics }} StreamRoute
 */

/** @param {StreamRoute} route @returns {import('express').RequestHandler} */
export function postUsersStream(route) {
  return (req, res, next) => {
    const unsupported = unsupportedOnStreams(res.locals.write);
    if (unsupported) return next(unsupported);
    const checked = checkStreamHeaders(req, route.maxStreamBytes);
    if ('error' in checked) return next(checked.error);
    route.admit(req, res, (/** @type {unknown} */ err) =>
      err ? next(err) : serve(route, { req, res, next }, checked.decoder),
    );
  };
}

/**
 * A stream admitted: read into the import, then answered.
 * @param {StreamRoute} route
 * @param {{ req: import('express').Request, res: import('express').Response,
 *   next: import('express').NextFunction }} exchange
 * @param {(() => import('node:stream').Transform) | null} decoder
 */
async function serve(route, { req, res, next }, decoder) {
  const { format, importUsers, maxStreamBytes, idleTimeoutMs, quarantineBound, metrics } = route;
  sendContinue(res);
  const reader = readStream(req, { decoder, maxStreamBytes, idleTimeoutMs });
  const { resolution, invalid } = res.locals.write;
  const rendering = renderingOf(res.locals.write);
  const requestKey = res.locals.idempotency;
  const key = requestKey && {
    client: requestKey.client,
    key: requestKey.key,
    hash: requestKey.hash,
    rendering,
  };
  let outcome;
  let quarantine;
  try {
    quarantine = invalid ? quarantineOf(req, format, invalid, quarantineBound) : undefined;
    outcome = await importUsers(reader.texts(), format, resolution, { quarantine, key });
  } catch (failure) {
    reader.close();
    res.locals.bodyBytes = reader.bytes();
    if (failure instanceof ClientGoneError) {
      chargeRefused(res);
      return req.socket.destroy();
    }
    return next(failure);
  }
  reader.close();
  if (!req.complete) req.resume(); // anything after a compressed stream, so the request ends
  if ('taken' in outcome) {
    try {
      return replayTaken(res, metrics, outcome.taken, outcome.fingerprint);
    } catch (refusal) {
      return next(refusal);
    }
  }
  metrics.streamSize.observe(outcome.received);
  answerWritten(res, metrics, { rendering, written: outcome, quarantine });
}

/**
 * What a stream cannot do, refused before a byte is read: answer its rows, or read some columns.
 * @param {import('./write-options.js').WriteOptions} options
 * @returns {ApiError | undefined}
 */
function unsupportedOnStreams({ return: returnPreference, query }) {
  if (returnPreference === 'representation') {
    return new ApiError(
      'unsupported_preference',
      'Prefer: return=representation is not supported on a streamed ' +
        'body (NDJSON, CSV): send return=minimal or none (the counts)',
    );
  }
  if (query.columns || query.select) {
    return new ApiError(
      'unsupported_query',
      `?${query.columns ? 'columns' : 'select'} is not supported on ` +
        `a streamed body (NDJSON, CSV): a CSV header names its columns`,
    );
  }
  return undefined;
}
