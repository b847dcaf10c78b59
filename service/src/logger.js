import pino from 'pino';
import { logSafeError } from './log-safe-error.js';
import { NO_TRACING } from './tracing/tracing.js';

// JSON logs on stdout. No secret reaches a line: Authorization and cookies are censored, errors go
// through logSafeError. Traced, a line written in a span carries its trace_id and span_id.
/**
 * @param {{ logLevel: string }} config
 * @param {pino.DestinationStream} [destination]
 * @param {import('./tracing/tracing.js').Tracing} [tracing]
 */
export function createLogger({ logLevel }, destination, tracing = NO_TRACING) {
  return pino(
    {
      level: logLevel,
      base: { pid: process.pid },
      serializers: { err: logSafeError },
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[redacted]' },
      ...(tracing.enabled ? { mixin: tracing.traceFieldsOfLog } : {}),
    },
    destination,
  );
}
