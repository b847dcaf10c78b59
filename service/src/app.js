import express from 'express';
import { ApiError } from './errors.js';
import { AdmissionBudget } from './http/admission-budget.js';
import { admitRequest } from './http/admission.js';
import { byContentType } from './http/content-types.js';
import { errorHandler } from './http/error-handler.js';
import { readIdempotencyKey } from './http/idempotency-key.js';
import { readJsonBody } from './http/json-body.js';
import { loopbackOnly } from './http/loopback-only.js';
import { postUsers } from './http/post-users.js';
import { STREAM_TYPES, postUsersStream } from './http/post-users-stream.js';
import { observeRequests } from './http/request-log.js';
import { authenticate } from './http/authenticate.js';
import { ClientDirectory } from './http/client-directory.js';
import { limitRate } from './http/rate-limit.js';
import { readWriteOptions } from './http/write-options.js';
import { createOpenApiDocument } from './openapi.js';
import { NO_TRACING } from './tracing/tracing.js';
import { GROUP_WRITE_SLOTS, createGroupCommit } from './users/group-commit.js';
import { createKeyStore } from './users/idempotency-keys.js';
import { startKeyPurge } from './users/key-purge.js';
import { startQuarantinePurge } from './users/quarantine-purge.js';
import { ScopeUsage } from './users/quarantine.js';
import { STREAM_HOLD_BYTES, createStreamImport } from './users/stream-import.js';
import { createUserWriter } from './users/user-writer.js';
import { createWriteGate, writeSlotsFor } from './users/write-gate.js';
import { createWritePolicy } from './users/write-policy.js';

/**
 * The composition root: every part built from the configuration and the routes laid out, so the
 * request path reads top to bottom here; the Express app, not listening (http/node-server.js).
 * @param {{ config: import('./config.js').Config, db: import('./db/database.js').Database,
 *   logger: import('pino').Logger, metrics: import('./metrics.js').Metrics,
 *   auth: import('./auth/start-auth.js').Authentication, renderMetrics?: () => Promise<string>,
 *   tracing?: import('./tracing/tracing.js').Tracing }} deps
 */
export function createApp({
  config,
  db,
  logger,
  metrics,
  auth,
  renderMetrics = () => metrics.registry.metrics(),
  tracing = NO_TRACING,
}) {
  // Writing: one policy for every writer; a request alone, or small ones grouped.
  const policy = createWritePolicy(db, { lockTimeoutMs: config.dbLockTimeoutMs });
  // Idempotency-Key: kept with each write, purged in the background once expired.
  const keys = createKeyStore({ ttlSeconds: config.idempotencyKeyTtlSeconds });
  startKeyPurge({ db, ttlSeconds: config.idempotencyKeyTtlSeconds, logger });
  // Items set aside: bounded a client (what each holds read once in a while), and deleted in the
  // background once older than their retention.
  const quarantineBound = { maxBytes: config.quarantineClientMaxBytes, usage: new ScopeUsage() };
  const quarantinePurge = startQuarantinePurge({
    db,
    retentionDays: config.quarantineRetentionDays,
    logger,
    purged: (rows) => metrics.quarantinePurged.inc(rows),
  });
  const writer = createUserWriter(db, {
    chunkRows: config.insertChunkRows,
    strategy: config.insertStrategy,
    policy,
    keys,
  });
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
  // Requests written alone take at most half the pool, never group commit's two write slots.
  const throughBatchGate = groupCommit
    ? createWriteGate(writeSlotsFor(config.dbPoolMax, GROUP_WRITE_SLOTS))
    : /** @type {<T>(w: () => Promise<T>) => Promise<T>} */ (w) => w();
  /** @type {import('./http/post-users.js').WriteUsers} */
  const write = async (rows, resolution, options) => {
    // A request with items set aside is written alone: its quarantine goes in its own transaction.
    if (groupCommit && rows.length <= config.groupCommitSmallRows && !options?.quarantine)
      return groupCommit.writeUsers(rows, resolution, options);
    const [outcome] = await throughBatchGate(() =>
      writer.write({
        kind: 'batch',
        rows,
        resolution,
        withRows: options?.withRows,
        key: options?.key,
        quarantine: options?.quarantine,
      }),
    );
    return outcome;
  };
  // Traced, the write is a span of its own, parent of its statements (or linked from its group's).
  /** @type {import('./http/post-users.js').WriteUsers} */
  const writeUsers = tracing.enabled
    ? (rows, resolution, options) =>
        tracing.inSpan(
          'sluice.write',
          { 'sluice.rows': rows.length, 'sluice.resolution': resolution },
          () => write(rows, resolution, options),
        )
    : write;
  // Who each request is for (its weight, cap and rate, declared with its credential); fairness
  // between them is the budget's.
  const clients = new ClientDirectory({ tokens: auth.tokens, jwtLimits: config.auth?.jwtLimits });
  // Without credentials nobody has a rate: the step is left out rather than passed through.
  const rateLimit =
    auth.tokens || auth.verifyJwt
      ? [limitRate({ refused: (label) => metrics.clients.refused(label, 'rate') })]
      : [];
  const budget = new AdmissionBudget({
    budgetBytes: config.admissionBudgetBytes,
    maxWaitMs: config.admissionWaitMs,
    onChange: metrics.admission.observe,
  });
  metrics.clients.watch(budget);
  // A streamed body (NDJSON, CSV) is imported as it arrives and answered there; any other goes on
  // to the JSON steps.
  const importUsers = createStreamImport({ db, policy, keys });
  const admitStream = admitRequest({
    budget,
    maxBodyBytes: config.maxStreamBytes,
    metrics: metrics.admission,
    clientMetrics: metrics.clients,
    holdBytes: STREAM_HOLD_BYTES,
  });
  /** @type {Record<string, import('express').RequestHandler>} */
  const streamRoutes = {};
  for (const [type, format] of Object.entries(STREAM_TYPES)) {
    streamRoutes[type] = postUsersStream({
      format,
      importUsers,
      admit: admitStream,
      maxStreamBytes: config.maxStreamBytes,
      idleTimeoutMs: config.streamIdleTimeoutMs,
      quarantineBound,
      metrics,
    });
  }

  const app = express();
  app.disable('x-powered-by');
  // No ETag: every answer is to a POST or a probe, so hashing each body for one is wasted CPU.
  app.set('etag', false);
  app.use(
    observeRequests(app, logger, metrics, {
      quiet: (req) => req.url === '/healthz' || req.url === '/metrics',
    }),
  );

  // The hot route first; each step refuses what it can before the next costs anything.
  app.post(
    '/users',
    authenticate({
      tokens: auth.tokens,
      verifyJwt: auth.verifyJwt,
      metrics: metrics.auth,
      tracing,
      clients,
    }),
    readWriteOptions(),
    readIdempotencyKey(),
    ...rateLimit,
    byContentType(streamRoutes),
    tracing.tracedMiddleware(
      'sluice.admission',
      admitRequest({
        budget,
        maxBodyBytes: config.maxBodyBytes,
        metrics: metrics.admission,
        clientMetrics: metrics.clients,
      }),
    ),
    tracing.tracedMiddleware('sluice.read_body', readJsonBody(config)),
    postUsers({
      writeUsers,
      maxBatchItems: config.maxBatchItems,
      quarantineBound,
      metrics,
      tracing,
    }),
  );

  // Any other method on /users: 405 with the method it serves (RFC 9110, 15.5.6).
  app.all('/users', (req, res, next) => {
    res.setHeader('Allow', 'POST');
    next(new ApiError('method_not_allowed', `${req.method} /users is not served: send POST`));
  });

  app.get('/healthz', (_req, res) => {
    res.json({ status: 'ok', pid: process.pid });
  });
  app.get('/readyz', async (_req, res) => {
    const { ready, reason } = await db.readiness();
    res.status(ready ? 200 : 503).json({ status: ready ? 'ready' : 'not_ready', reason });
  });
  app.get(
    '/metrics',
    loopbackOnly('GET /metrics', { open: config.metricsPublic }),
    async (_req, res) => {
      res.type(metrics.registry.contentType).send(await renderMetrics());
    },
  );
  const openApiDocument = createOpenApiDocument(config);
  app.get('/openapi.json', (_req, res) => {
    res.json(openApiDocument);
  });

  app.use((req, _res, next) =>
    next(new ApiError('not_found', `no route for ${req.method} ${req.path}`)),
  );
  app.use(errorHandler(config));
  app.locals.quarantinePurge = quarantinePurge;
  return app;
}
