import { Writable } from 'node:stream';
import express from 'express';
import { startAuthentication } from '../../service/src/auth/start-auth.js';
import { loadConfig } from '../../service/src/config.js';
import { authenticate } from '../../service/src/http/authenticate.js';
import { errorHandler } from '../../service/src/http/error-handler.js';
import { createHttpServer } from '../../service/src/http/node-server.js';
import { observeRequests } from '../../service/src/http/request-log.js';
import { requireEraseRight } from '../../service/src/http/require-erase.js';
import { createLogger } from '../../service/src/logger.js';
import { createMetrics } from '../../service/src/metrics.js';

/** The probe's route: it stands for a route that erases, and erases nothing. */
export const PROBE_PATH = '/erase-probe';

/**
 * The service's request path for a route that erases, on 127.0.0.1, port 0: its request log,
 * authenticate and requireEraseRight as the service builds them from `env`, then a handler that
 * counts the requests that reach it, and the service's error handler. Log lines kept.
 * @param {{ env?: Record<string, string> }} [options]
 */
export async function startEraseProbe({ env = {} } = {}) {
  const config = loadConfig({ LOG_LEVEL: 'info', ...env });
  /** @type {any[]} */
  const logs = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line) logs.push(JSON.parse(line));
      done();
    },
  });
  const logger = createLogger(config, sink);
  const metrics = createMetrics(undefined);
  const auth = await startAuthentication(config.auth, { logger });
  let reached = 0;

  const app = express();
  app.use(observeRequests(app, logger, metrics));
  app.post(
    PROBE_PATH,
    authenticate({ tokens: auth.tokens, verifyJwt: auth.verifyJwt, metrics: metrics.auth }),
    requireEraseRight(auth),
    (_req, res) => {
      reached++;
      res.json({ erased: 0 });
    },
  );
  app.use(errorHandler(config));
  const server = createHttpServer(app);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  const url = `http://127.0.0.1:${port}${PROBE_PATH}`;

  return {
    logs,
    /** How many requests the route's handler was given. */
    reached: () => reached,
    /** @param {string} [token] its bearer; none: no Authorization */
    async erase(token) {
      const res = await fetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        },
        body: '["someone@example.com"]',
      });
      return { status: res.status, headers: res.headers, body: await res.json() };
    },
    async close() {
      auth.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
