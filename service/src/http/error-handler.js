import { randomUUID } from 'node:crypto';
import {
  API_ERRORS,
  ApiError,
  DatabaseTimeoutError,
  DatabaseUnavailableError,
  InvalidBatchError,
  OutcomeUnknownError,
  RateLimitedError,
  UnauthorizedError,
  itemErrorsAsDetails,
} from '../errors.js';
import { chargeRefused } from './rate-limit.js';
import { finishUnreadBody } from './unread-body.js';

/**
 * @param {unknown} err @returns {{ status: number, headers: Record<string, string>,
 *   body: Record<string, unknown>, apiError: ApiError | undefined }}
 */
export function describeError(err) {
  const apiError = err instanceof ApiError ? err : undefined;
  if (!apiError) {
    const errorId = randomUUID();
    const spec = API_ERRORS.internal;
    return {
      status: 500,
      headers: {},
      body: {
        error: 'internal',
        message: spec.message,
        errorId,
        code: spec.pgrst,
        details: null,
        hint: null,
      },
      apiError,
    };
  }
  /** @type {import('../errors.js').ApiErrorSpec} */
  const spec = API_ERRORS[apiError.code];
  /** @type {Record<string, unknown>} */
  const body = {
    error: apiError.code,
    message: apiError.message,
  };
  if (apiError instanceof InvalidBatchError) body.errors = apiError.errors;
  // PostgREST's shape beside sluice's, for its clients (postgrest-js).
  body.code = spec.pgrst;
  body.details =
    apiError.details ??
    (apiError instanceof InvalidBatchError ? itemErrorsAsDetails(apiError.errors) : null);
  body.hint = spec.hint ?? null;
  const own =
    apiError instanceof UnauthorizedError || apiError instanceof RateLimitedError
      ? apiError.headers
      : {};
  const headers = { ...('headers' in spec ? spec.headers : {}), ...own };
  return { status: spec.status, headers, body, apiError };
}

/**
 * A 500's id in the answer and the log, no stack trace out; an unread body is let arrive.
 * @param {{ maxBodyBytes: number, bodyReadTimeoutMs: number }} limits
 * @returns {import('express').ErrorRequestHandler}
 */
export function errorHandler(limits) {
  return (err, req, res, _next) => {
    if (res.headersSent) return req.socket.destroy();
    const { status, headers, body, apiError } = describeError(err);
    if (apiError instanceof DatabaseUnavailableError)
      req.log.warn({ err: apiError.cause }, 'database unavailable');
    if (apiError instanceof OutcomeUnknownError)
      req.log.warn(
        { err: apiError.cause },
        'connection lost after the commit was sent: outcome unknown',
      );
    if (apiError instanceof DatabaseTimeoutError)
      req.log.warn(
        { err: apiError.cause },
        apiError.code === 'lock_timeout' ? 'locked out by another writer' : 'statement timed out',
      );
    if (!apiError) req.log.error({ err, errorId: body.errorId }, 'unexpected error');
    chargeRefused(res);
    finishUnreadBody(req, res, { ...limits, code: apiError?.code });
    res.status(status).set(headers).json(body);
  };
}
