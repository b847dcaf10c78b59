import { ApiError } from '../errors.js';
import { answerWritten, countWritten, sendAnswer, writtenAnswer } from './answer.js';
import { sendContinue } from './expect-continue.js';
import { keyForWriter, replayTaken } from './idempotency-key.js';
import { quarantineOf } from './quarantine-request.js';
import { chargeRefused } from './rate-limit.js';
import { ClientGoneError } from './read-body.js';
import { checkStreamHeaders, readStream } from './stream-body.js';

// POST /users with a streamed body (NDJSON, CSV): its headers checked, admitted for what it holds
// at once, `100 Continue` sent, its text read piece by piece into the import
// (users/stream-import.js) and the counts answered (with an Idempotency-Key: the answer stored with
// the import, or the one stored under the key replayed). A client gone mid-body gets no answer: its
// socket is destroyed.

/** The media types of a stream, by the format of its records (byContentType's routes). */
export const STREAM_TYPES = Object.freeze({
  'application/x-ndjson': 'ndjson',
  'application/jsonl': 'ndjson',
  'text/csv': 'csv',
});

/**
 * @param {{ format: import('../users/stream-import.js').StreamFormat,
 *   importUsers: ReturnType<typeof import('../users/stream-import.js').createStreamImport>,
 *   admit: import('express').RequestHandler, maxStreamBytes: number, idleTimeoutMs: number,
 *   quarantineBound: import('../users/quarantine.js').ClientBound,
 *   metrics: import('../metrics.js').Metrics }} deps @returns {import('express').RequestHandler}
 */
export function postUsersStream({
  format,
  importUsers,
  admit,
  maxStreamBytes,
  idleTimeoutMs,
  quarantineBound,
  metrics,
}) {
  return (req, res, next) => {
    const unsupported = unsupportedOnStreams(res.locals.write);
    if (unsupported) return next(unsupported);
    const checked = checkStreamHeaders(req, maxStreamBytes);
    if ('error' in checked) return next(checked.error);
    admit(req, res, (/** @type {unknown} */ err) =>
      err ? next(err) : serve(req, res, next, checked.decoder),
    );
  };

  /**
   * @param {import('express').Request} req
   * @param {import('express').Response} res
   * @param {import('express').NextFunction} next
   * @param {(() => import('node:stream').Transform) | null} decoder
   */
  async function serve(req, res, next, decoder) {
    sendContinue(res);
    const reader = readStream(req, { decoder, maxStreamBytes, idleTimeoutMs });
    const key = res.locals.idempotency;
    let outcome;
    try {
      const { resolution, invalid } = res.locals.write;
      const quarantine = invalid ? quarantineOf(req, format, invalid, quarantineBound) : undefined;
      outcome = key
        ? await importUsers(fingerprinted(reader.texts(), key), format, resolution, {
            quarantine,
            key: keyForWriter(key, (counts) =>
              writtenAnswer(
                res.locals.write,
                /** @type {import('../users/stream-import.js').ImportCounts} */ (counts),
              ),
            ),
          })
        : await importUsers(reader.texts(), format, resolution, { quarantine });
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
        return replayTaken(
          res,
          metrics,
          /** @type {import('./idempotency-key.js').RequestKey} */ (key),
          outcome.taken,
        );
      } catch (refusal) {
        return next(refusal);
      }
    }
    metrics.streamSize.observe(outcome.received);
    if (!outcome.answer) return answerWritten(res, metrics, outcome);
    countWritten(res, metrics, outcome);
    sendAnswer(res, outcome.answer);
  }
}

/**
 * The body's text as read, each piece into the key's fingerprint.
 * @param {AsyncIterable<string>} texts
 * @param {import('./idempotency-key.js').RequestKey} key
 */
async function* fingerprinted(texts, key) {
  for await (const text of texts) {
    key.update(text);
    yield text;
  }
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
