import express from 'express';
import { HttpError } from './errors.js';
import { errorHandler } from './http/error-handler.js';
import { requestLog } from './http/request-log.js';
import { createOpenApiDocument } from './openapi.js';
import { mountUserRoutes } from './users/user-routes.js';

/**
 * Builds the Express app without listening, so tests drive it on port 0.
 *
 * @param {{
 *   config: import('./config.js').Config,
 *   db: import('./db.js').Database,
 *   logger: import('pino').Logger,
 *   metrics: import('./metrics.js').Metrics,
 *   renderMetrics?: () => Promise<string>,
 * }} deps  renderMetrics: how /metrics is rendered (the cluster aggregates across workers)
 */
export function createApp({ config, db, logger, metrics, renderMetrics = () => metrics.registry.metrics() }) {
  const app = express();
  app.disable('x-powered-by');
  // No ETag: every answer is to a POST or a probe, so hashing each body for one is wasted CPU.
  app.set('etag', false);

  app.use(requestLog(logger, { quiet: (req) => req.url === '/healthz' || req.url === '/metrics' }));

  app.use((req, res, next) => {
    const end = metrics.httpDuration.startTimer();
    res.on('finish', () => {
      const route = req.route?.path ?? 'unmatched';
      end({ method: req.method, route });
      metrics.httpRequests.inc({ method: req.method, route, status: res.statusCode });
    });
    next();
  });

  // The hot route first: the others are matched only when it does not match.
  mountUserRoutes(app, { config, db, metrics });
  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok', pid: process.pid });
  });
  app.get('/readyz', async (_req, res) => {
    const ready = await db.isReady();
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'not_ready' });
  });
  app.get('/metrics', async (_req, res) => {
    res.type(metrics.registry.contentType).send(await renderMetrics());
  });
  const openApiDocument = createOpenApiDocument(config);
  app.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument);
  });


  app.use((req, _res, next) => next(new HttpError(404, 'not_found', `no route for ${req.method} ${req.path}`)));
  app.use(errorHandler);
  return app;
}
