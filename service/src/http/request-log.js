import { randomUUID } from 'node:crypto';

/** A client's X-Request-Id is kept when it is a sane token, so logs join across services. */
const REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * Request ids and the access log, at the cost the hot path can afford.
 *
 * Every request gets an id (the client's X-Request-Id when sane, else a UUID), sent back in
 * X-Request-Id, and `req.log`, a logger whose lines carry it. That child logger is made only when
 * something logs: under the single-user load test, pino-http's two eager child loggers per request
 * and its per-request line were about a tenth of the service's CPU, plus the garbage they made.
 *
 * One line per finished request: refusals (4xx) at warn and failures (5xx) at error, always;
 * successful requests at debug, since at thousands of requests a second they are noise that
 * /metrics already counts by route and status. Only what helps operate the service is logged:
 * never headers or bodies (user data, the token).
 *
 * @param {import('pino').Logger} logger
 * @param {{ quiet?: (req: import('express').Request) => boolean }} [options]  quiet: never logged (probes, scrapes)
 * @returns {import('express').RequestHandler}
 */
export function requestLog(logger, { quiet = () => false } = {}) {
  return (req, res, next) => {
    const given = req.headers['x-request-id'];
    const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    res.setHeader('X-Request-Id', id);
    /** @type {import('pino').Logger | undefined} */
    let child;
    Object.defineProperty(req, 'log', { get: () => (child ??= logger.child({ reqId: id })), configurable: true });
    /** @type {any} */ (req).id = id;

    const started = performance.now();
    res.on('finish', () => {
      const status = res.statusCode;
      const level = status >= 500 ? 'error' : status >= 400 ? 'warn' : 'debug';
      if (!logger.isLevelEnabled(level) || quiet(req)) return;
      req.log[level](
        { req: { method: req.method, url: req.originalUrl }, res: { statusCode: status }, responseTime: Math.round(performance.now() - started) },
        'request completed',
      );
    });
    next();
  };
}
