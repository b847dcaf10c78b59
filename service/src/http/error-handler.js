import { randomUUID } from 'node:crypto';
import { DatabaseUnavailableError, HttpError, InvalidBatchError } from '../errors.js';

const RETRY_AFTER_SECONDS = '2';

// raw-body (which reads bodies in http/json-body.js) signals its failures with `type`; each is the
// client's to fix. The body reader's own refusals are HttpErrors.
/** @type {Record<string, [number, string, string]>} */
const BODY_ERRORS = {
  'entity.too.large': [413, 'payload_too_large', 'the body (decompressed) is larger than MAX_BODY_BYTES; nothing was written'],
  'request.aborted': [400, 'request_aborted', 'the request was aborted'],
  'request.size.invalid': [400, 'request_size_invalid', 'the body does not match its Content-Length'],
};

/**
 * The one place where errors become responses. Known errors keep their status; anything else is a
 * 500 whose id is in both the answer and the log, and no stack trace leaves the process.
 *
 * @type {import('express').ErrorRequestHandler}
 */
export function errorHandler(err, req, res, _next) {
  if (res.headersSent) return req.socket.destroy();

  if (err instanceof InvalidBatchError) {
    return res.status(400).json({ error: err.code, message: err.message, errors: err.errors });
  }
  if (err instanceof HttpError) {
    return res.status(err.status).set(err.headers).json({ error: err.code, message: err.message });
  }
  const bodyError = typeof err?.type === 'string' ? BODY_ERRORS[err.type] : undefined;
  if (bodyError) {
    const [status, error, message] = bodyError;
    return res.status(status).json({ error, message });
  }
  if (err instanceof DatabaseUnavailableError) {
    req.log.warn({ cause: describeCause(err.cause) }, 'database unavailable');
    return res.status(503).set('Retry-After', RETRY_AFTER_SECONDS).json({ error: 'database_unavailable', message: 'the database cannot take writes now; nothing was written, retry later' });
  }

  const errorId = randomUUID();
  req.log.error({ err, errorId }, 'unexpected error');
  res.status(500).json({ error: 'internal', message: 'unexpected error; nothing was written', errorId });
}

/** @param {unknown} cause */
function describeCause(cause) {
  if (!(cause instanceof Error)) return String(cause);
  return { message: cause.message, code: /** @type {{ code?: string }} */ (cause).code };
}
