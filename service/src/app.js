import express from 'express';
import { ApiError } from './errors.js';
import { AdmissionBudget } from './http/admission-budget.js';
import { admitRequest } from './http/admission.js';
import { errorHandler } from './http/error-handler.js';
import { readJsonBody } from './http/json-body.js';
import { readPreferences } from './http/prefer.js';
import { readWriteQuery } from './http/write-query.js';
import { observeRequests } from './http/request-log.js';
import { authenticate } from './http/authenticate.js';
import { createOpenApiDocument } from './openapi.js';
import { NO_TRACING } from './tracing/tracing.js';
import { createGroupCommit } from './users/group-commit.js';
import { postUsers } from './users/post-users.js';
import { STREAM_HOLD_BYTES, streamUsers } from './users/stream-import.js';
import { createUserWriter } from './users/user-repository.js';
import { createWritePolicy } from './users/write-policy.js';

/**
 * The composition root: builds every part of the service from the configuration, hands each what
 * it uses, and lays out the routes, so the whole request path reads top to bottom here. Returns
 * the Express app without listening (http/node-server.js serves it; tests drive it on port 0).
 *
 * @param {{
 *   config: import('./config.js').Config,
 *   db: import('./db/database.js').Database,
 *   logger: import('pino').Logger,
 *   metrics: import('./metrics.js').Metrics,
 *   auth: import('./auth/start-auth.js').Authentication,
 *   renderMetrics?: () => Promise<string>,
 *   tracing?: import('./tracing/tracing.js').Tracing,
 * }} deps  auth: the credentials POST /users accepts (auth/start-auth.js, started before);
 *   renderMetrics: how /metrics is rendered (the cluster aggregates across workers); tracing: the
 *   spans of the request's steps and of its write (off unless handed one: main.js makes it)
 */
export function createApp({ config, db, logger, metrics, auth, renderMetrics = () => metrics.registry.metrics(), tracing = NO_TRACING }) {
  // Writing (users/write-policy.js decides the time limits and what a failure means for every
  // writer): a request alone, or small ones grouped into one statement (users/group-commit.js).
  const policy = createWritePolicy(db, { lockTimeoutMs: config.dbLockTimeoutMs });
  const writer = createUserWriter(db, { chunkRows: config.insertChunkRows, strategy: config.insertStrategy, policy });
  const groupCommit = config.groupCommit
    ? createGroupCommit({
        write: writer.write,
        policy,
        maxRows: config.groupCommitMaxRows,
        observe({ requests, rows, waitedSeconds }) {
          metrics.groupRequests.observe(requests);
          metrics.groupRows.observe(rows);
          for (const s of waitedSeconds) metrics.groupWait.observe(s);
        },
        tracing,
      })
    : undefined;
  /** @type {import('./users/post-users.js').WriteUsers} */
  const write = async (rows, resolution, options) => {
    if (groupCommit && rows.length <= config.groupCommitSmallRows) return groupCommit.writeUsers(rows, resolution, options);
    const [counts] = await writer.write({ kind: 'batch', rows, resolution, withRows: options?.withRows });
    return counts;
  };
  // Traced, the write is a span of its own, parent of its statements (or linked from its group's).
  /** @type {import('./users/post-users.js').WriteUsers} */
  const writeUsers = tracing.enabled
    ? (rows, resolution, options) => tracing.inSpan('sluice.write', { 'sluice.rows': rows.length, 'sluice.resolution': resolution }, () => write(rows, resolution, options))
    : write;
  // The in-flight work budget, in body bytes (http/admission-budget.js; http/admission.js admits a request into it).
  const budget = new AdmissionBudget({ budgetBytes: config.admissionBudgetBytes, maxWaitMs: config.admissionWaitMs, onChange: metrics.admission.observe });

  const app = express();
  app.disable('x-powered-by');
  // No ETag: every answer is to a POST or a probe, so hashing each body for one is wasted CPU.
  app.set('etag', false);
  app.use(observeRequests(app, logger, metrics, { quiet: (req) => req.url === '/healthz' || req.url === '/metrics' }));

  // The hot route first, on the app itself: under the single-user load every layer shows. Each step
  // refuses what it can before the next one costs anything; the body is read only once admitted.
  app.post(
    '/users',
    authenticate({ tokens: auth.tokens, verifyJwt: auth.verifyJwt, metrics: metrics.auth, tracing }),
    readPreferences(),
    readWriteQuery(),
    // An NDJSON or CSV body is streamed (users/stream-import.js) and answered there; a JSON one goes on.
    streamUsers({
      db,
      policy,
      admit: admitRequest({ budget, maxBodyBytes: config.maxStreamBytes, metrics: metrics.admission, holdBytes: STREAM_HOLD_BYTES }),
      maxStreamBytes: config.maxStreamBytes,
      idleTimeoutMs: config.streamIdleTimeoutMs,
      metrics,
    }),
    tracing.tracedMiddleware('sluice.admission', admitRequest({ budget, maxBodyBytes: config.maxBodyBytes, metrics: metrics.admission })),
    tracing.tracedMiddleware('sluice.read_body', readJsonBody(config)),
    postUsers({ writeUsers, maxBatchItems: config.maxBatchItems, metrics, tracing }),
  );

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok', pid: process.pid });
  });
  app.get('/readyz', async (_req, res) => {
    const ready = await db.isReady();
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'not_ready', reason: ready ? undefined : db.notReadyBecause?.() });
  });
  app.get('/metrics', async (_req, res) => {
    res.type(metrics.registry.contentType).send(await renderMetrics());
  });
  const openApiDocument = createOpenApiDocument(config);
  app.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument);
  });

  app.use((req, _res, next) => next(new ApiError('not_found', `no route for ${req.method} ${req.path}`)));
  app.use(errorHandler(config));
  return app;
}
