import pino from 'pino';
import { logSafeError } from './log-safe-error.js';
import { NO_TRACING } from './tracing/tracing.js';

/**
 * JSON logs on stdout. Secrets never reach a line: the Authorization header is censored wherever
 * a request's log would print it, and an error is logged through logSafeError (a database error by
 * its SQLSTATE, constraint, table and column; never the row it refused). Traced, each line written
 * while a span is active carries its trace_id and span_id.
 *
 * @param {{ logLevel: string }} config
 * @param {pino.DestinationStream} [destination]
 * @param {import('./tracing/tracing.js').Tracing} [tracing]  off (NO_TRACING) unless handed one
 */
export function createLogger({ logLevel }, destination, tracing = NO_TRACING) {
  return pino(
    {
      level: logLevel,
      base: { pid: process.pid },
      serializers: { err: logSafeError },
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[redacted]' },
      // Traced, a line written while a span is active carries its trace_id and span_id.
      ...(tracing.enabled ? { mixin: tracing.traceFieldsOfLog } : {}),
    },
    destination,
  );
}
