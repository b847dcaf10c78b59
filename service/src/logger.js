import pino from 'pino';
import { logSafeError } from './log-safe-error.js';

/**
 * JSON logs on stdout. Secrets never reach a line: the Authorization header is censored wherever
 * a request's log would print it, and an error is logged through logSafeError (a database error by
 * its SQLSTATE, constraint, table and column; never the row it refused).
 *
 * @param {{ logLevel: string }} config
 * @param {pino.DestinationStream} [destination]
 */
export function createLogger({ logLevel }, destination) {
  return pino(
    {
      level: logLevel,
      base: { pid: process.pid },
      serializers: { err: logSafeError },
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[redacted]' },
    },
    destination,
  );
}
