import { randomUUID } from 'node:crypto';

/** A client's X-Request-Id is kept when it is a sane token, so logs join across services. */
const REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * Request ids, the access log and the HTTP metrics, at the cost the hot path can afford: one
 * middleware and one 'finish' listener per request for all three (under the single-user load
 * every listener and every allocation of a request shows in the profile).
 *
 * Every request gets an id (the client's X-Request-Id when sane, else a UUID), sent back in
 * X-Request-Id, and `req.log`, a logger whose lines carry it. That child logger is made only when
 * something logs, by a getter on the app's request prototype: pino-http's two eager child loggers
 * per request and its per-request line were about a tenth of the service's CPU.
 *
 * One line per finished request: refusals (4xx) and 503s (the database's state or the service's
 * load, retried by the client; their cause is logged at warn beside) at warn, failures (other 5xx)
 * at error, always;
 * successful requests at debug, since at thousands of requests a second they are noise that
 * /metrics already counts by route and status. Only what helps operate the service is logged:
 * never headers or bodies (user data, the token); the client's name when one was accepted.
 *
 * @param {import('express').Express} app  its request prototype gets `log`
 * @param {import('pino').Logger} logger
 * @param {import('../metrics.js').Metrics} metrics
 * @param {{ quiet?: (req: import('express').Request) => boolean }} [options]  quiet: never logged (probes, scrapes)
 * @returns {import('express').RequestHandler}
 */
export function observeRequests(app, logger, metrics, { quiet = () => false } = {}) {
  Object.defineProperty(app.request, 'log', {
    get() {
      return (this._log ??= logger.child({ reqId: this.id }));
    },
    configurable: true,
  });
  const counted = labelledChildren(metrics);

  return (req, res, next) => {
    const given = req.headers['x-request-id'];
    const id = typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    res.setHeader('X-Request-Id', id);
    /** @type {any} */ (req).id = id;
    const started = performance.now();
    res.on('finish', () => {
      const seconds = (performance.now() - started) / 1000;
      const status = res.statusCode;
      counted(req.method, req.route?.path ?? 'unmatched', status, seconds);
      const level = status >= 500 && status !== 503 ? 'error' : status >= 400 ? 'warn' : 'debug';
      if (!logger.isLevelEnabled(level) || quiet(req)) return;
      // The client's name when its credentials were accepted (http/authenticate.js), never a token.
      const client = /** @type {import('express').Request} */ (req).clientName;
      req.log[level]({ req: { method: req.method, url: req.originalUrl }, res: { statusCode: status }, responseTime: Math.round(seconds * 1000), ...(client === undefined ? {} : { client }) }, 'request completed');
    });
    next();
  };
}

/**
 * Counts a finished request in sluice_http_requests_total and its duration in
 * sluice_http_request_duration_seconds through labelled children kept by method, route and status:
 * prom-client would otherwise hash the label object of every request, twice.
 * @param {import('../metrics.js').Metrics} metrics
 */
function labelledChildren(metrics) {
  /** @type {Map<string, { requests: import('prom-client').Counter.Internal, duration: import('prom-client').Histogram.Internal }>} */
  const children = new Map();
  /** @param {string} method @param {string} route @param {number} status @param {number} seconds */
  return (method, route, status, seconds) => {
    const key = `${method} ${route} ${status}`;
    let child = children.get(key);
    if (!child) {
      child = { requests: metrics.httpRequests.labels({ method, route, status }), duration: metrics.httpDuration.labels({ method, route }) };
      children.set(key, child);
    }
    child.requests.inc();
    child.duration.observe(seconds);
  };
}
