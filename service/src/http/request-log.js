import { randomUUID } from 'node:crypto';

/** A client's X-Request-Id is kept when it is a sane token, so logs join across services. */
const REQUEST_ID = /^[\w.:-]{1,128}$/;
/** A query parameter's name as logged; another (a value sent without `=`, say) is logged as `*`. */
const PARAMETER_NAME = /^[A-Za-z_][\w.-]{0,63}$/;

/** Its query's names only: a value may be a token or an email. @param {string} url */
export function loggedUrl(url) {
  const mark = url.indexOf('?');
  if (mark === -1) return url;
  const names = url
    .slice(mark + 1)
    .split('&')
    .filter((pair) => pair !== '')
    .map((pair) => {
      const equals = pair.indexOf('=');
      const name = equals === -1 ? pair : pair.slice(0, equals);
      return PARAMETER_NAME.test(name) ? name : '*';
    });
  return names.length === 0 ? url.slice(0, mark) : `${url.slice(0, mark)}?${names.join('&')}`;
}

/**
 * One middleware and one 'finish' listener; `req.log` made lazily by a getter on the request
 * prototype. Never headers or bodies, nor a query's values. quiet: never logged (probes, scrapes).
 * @param {import('express').Express} app @param {import('pino').Logger} logger
 * @param {import('../metrics.js').Metrics} metrics
 * @param {{ quiet?: (req: import('express').Request) => boolean }} [options]
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
    const kept = typeof given === 'string' && REQUEST_ID.test(given) ? given : undefined;
    const id = kept ?? randomUUID();
    res.setHeader('X-Request-Id', id);
    /** @type {any} */ (req).id = id;
    if (kept !== undefined) req.clientRequestId = kept;
    const started = performance.now();
    res.on('finish', () => {
      const seconds = (performance.now() - started) / 1000;
      const status = res.statusCode;
      counted(req.method, req.route?.path ?? 'unmatched', status, seconds);
      const level = status >= 500 && status !== 503 ? 'error' : status >= 400 ? 'warn' : 'debug';
      if (!logger.isLevelEnabled(level) || quiet(req)) return;
      // The accepted client's name, never its token.
      const { clientName: client, refusedBecause: authRefusal } =
        /** @type {import('express').Request} */ (req);
      req.log[level](
        {
          req: { method: req.method, url: loggedUrl(req.originalUrl) },
          res: { statusCode: status },
          responseTime: Math.round(seconds * 1000),
          ...(client === undefined ? {} : { client }),
          ...(authRefusal === undefined ? {} : { authRefusal }),
        },
        'request completed',
      );
    });
    next();
  };
}

/** Children kept by method, route and status. @param {import('../metrics.js').Metrics} metrics */
function labelledChildren(metrics) {
  /**
   * @type {Map<string, { requests: import('prom-client').Counter.Internal,
   *   duration: import('prom-client').Histogram.Internal }>}
   */
  const children = new Map();
  /** @param {string} method @param {string} route @param {number} status @param {number} seconds */
  return (method, route, status, seconds) => {
    const key = `${method} ${route} ${status}`;
    let child = children.get(key);
    if (!child) {
      child = {
        requests: metrics.httpRequests.labels({ method, route, status }),
        duration: metrics.httpDuration.labels({ method, route }),
      };
      children.set(key, child);
    }
    child.requests.inc();
    child.duration.observe(seconds);
  };
}
