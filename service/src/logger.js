import pino from 'pino';

/**
 * JSON logs on stdout. Secrets never reach a line: the Authorization header is censored wherever
 * a request's log would print it.
 *
 * @param {{ logLevel: string }} config
 * @param {pino.DestinationStream} [destination]
 */
export function createLogger({ logLevel }, destination) {
  return pino(
    {
      level: logLevel,
      base: { pid: process.pid },
      redact: { paths: ['req.headers.authorization', 'req.headers.cookie'], censor: '[redacted]' },
    },
    destination,
  );
}
