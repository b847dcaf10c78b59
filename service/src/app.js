import express from 'express';
import { ApiError } from './errors.js';
import { AdmissionBudget } from './http/admission-budget.js';
import { admitRequest } from './http/admission.js';
import { byContentType } from './http/content-types.js';
import { errorHandler } from './http/error-handler.js';
import { deleteUsers, postErasures } from './http/erasures.js';
import { requireEraseRight } from './http/require-erase.js';
import { readIdempotencyKey } from './http/idempotency-key.js';
import { readJsonBody } from './http/json-body.js';
import { readNdjsonBody } from './http/ndjson-body.js';
import { loopbackOnly } from './http/loopback-only.js';
import { postUsers } from './http/post-users.js';
import { STREAM_TYPES, postUsersStream } from './http/post-users-stream.js';
import { observeRequests } from './http/request-log.js';
import { authenticate } from './http/authenticate.js';
import { ClientDirectory } from './http/client-directory.js';
import { limitRate } from './http/rate-limit.js';
import { SharedRates } from './http/shared-rate.js';
import { createLeaseStore } from './db/rate-leases.js';
import { readWriteOptions } from './http/write-options.js';
import { createOpenApiDocument } from './openapi.js';
import { NO_TRACING } from './tracing/tracing.js';
import { GROUP_WRITE_SLOTS, createGroupCommit } from './users/group-commit.js';
import { erasureKeyOf } from './config.js';
import { createErasureGuard } from './users/erasure-guard.js';
import { createKeyStore } from './users/idempotency-keys.js';
import { startKeyPurge } from './users/key-purge.js';
import { startQuarantinePurge } from './users/quarantine-purge.js';
import { ScopeUsage } from './users/quarantine.js';
import { STREAM_HOLD_BYTES, createStreamImport } from './users/stream-import.js';
import { createUserWriter } from './users/user-writer.js';
import { createWriteGate, writeSlotsFor } from './users/write-gate.js';
import { createWritePolicy } from './users/write-policy.js';

/**
 * @typedef {{ config: import('./config.js').Config, db: import('./db/database.js').Database,
 *   logger: import('pino').Logger, metrics: import('./metrics.js').Metrics,
 *   auth: import('./auth/start-auth.js').Authentication, renderMetrics?: () => Promise<string>,
 *   tracing?: import('./tracing/tracing.js').Tracing }} AppDeps
 * @typedef {Required<AppDeps>} Parts
 */

/**
 * The composition root: every part built from the configuration and the routes laid out, so the
 * request path reads top to bottom here; the Express app, not listening (http/node-server.js).
 * @param {AppDeps} deps
 */
export function createApp(deps) {
  /** @type {Parts} */
  const parts = {
    ...deps,
    renderMetrics: deps.renderMetrics ?? (() => deps.metrics.registry.metrics()),
    tracing: deps.tracing ?? NO_TRACING,
  };
  const { config, logger, metrics, auth, tracing } = parts;
  const writing = createWriting(parts);
  const { clients, rateLimit, admission, rates } = createAdmission(parts);
  const authenticated = authenticate({
    tokens: auth.tokens,
    verifyJwt: auth.verifyJwt,
    metrics: metrics.auth,
    tracing,
    clients,
  });

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
    authenticated,
    readWriteOptions(),
    readIdempotencyKey(),
    ...rateLimit,
    // A streamed body (NDJSON, CSV) is imported as it arrives and answered there; any other goes
    // on to the JSON steps.
    byContentType(streamRoutes(parts, writing, admission)),
    tracing.tracedMiddleware(
      'sluice.admission',
      admitRequest({ ...admission, maxBodyBytes: config.maxBodyBytes }),
    ),
    tracing.tracedMiddleware('sluice.read_body', readJsonBody(config)),
    postUsers({ ...writing, maxBatchItems: config.maxBatchItems, metrics, tracing }),
  );
  routeErasures(app, parts, { writing, authenticated, rateLimit, admission });
  serveTheRest(app, parts);
  app.locals.quarantinePurge = writing.quarantinePurge;
  app.locals.sharedRates = rates;
  return app;
}

/**
 * Erasing: PostgREST's DELETE on /users and the bulk form, after the same credentials and fair
 * shares as a write.
 * @param {import('express').Express} app @param {Parts} parts
 * @param {{ writing: ReturnType<typeof createWriting>,
 *   authenticated: import('express').RequestHandler,
 *   rateLimit: import('express').RequestHandler[],
 *   admission: Omit<Parameters<typeof admitRequest>[0], 'maxBodyBytes'> }} steps
 */
function routeErasures(app, parts, { writing, authenticated, rateLimit, admission }) {
  const { config, db, metrics, auth } = parts;
  const { erasures, keys, policy } = writing;
  const erasing = { db, erasures, keys, policy, metrics, maxBatchItems: config.maxBatchItems };
  // Erasing is a right of its own, refused (403) before anything else is read.
  const mayErase = requireEraseRight(auth);
  const jsonBody = readJsonBody(config);
  const ndjsonBody = readNdjsonBody(config);
  const ndjson = { 'application/x-ndjson': ndjsonBody, 'application/jsonl': ndjsonBody };
  app.delete(
    '/users',
    authenticated,
    mayErase,
    readWriteOptions(),
    ...rateLimit,
    deleteUsers(erasing),
  );
  app.post(
    '/erasures',
    authenticated,
    mayErase,
    readIdempotencyKey(),
    // An erasure's key is never a write's: its fingerprint begins with its route.
    (_req, res, next) => {
      res.locals.idempotency?.hash.update('POST /erasures\n');
      next();
    },
    ...rateLimit,
    admitRequest({ ...admission, maxBodyBytes: config.maxBodyBytes }),
    // An array, or NDJSON: either way the erasures as an array.
    byContentType(ndjson),
    (req, res, next) => (Array.isArray(req.body) ? next() : jsonBody(req, res, next)),
    postErasures(erasing),
  );
}

/**
 * Who each request is for (its weight, cap and rate, declared with its credential), its rate, and
 * the admission budget that is fair between clients.
 * @param {Parts} parts
 */
function createAdmission({ config, db, logger, metrics, auth }) {
  // A client's rate is the deployment's: each process leases its share in the database.
  const rates = new SharedRates({ store: createLeaseStore(db), logger, metrics: metrics.rates });
  const clients = new ClientDirectory({
    tokens: auth.tokens,
    jwtLimits: config.auth?.jwtLimits,
    buckets: rates,
  });
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
  const admission = { budget, metrics: metrics.admission, clientMetrics: metrics.clients };
  return { clients, rateLimit, admission, rates };
}

/**
 * Writing: one policy for every writer; a request alone, or small ones grouped; the stream
 * import; the keys' and the quarantine's purges in the background.
 * @param {Parts} parts
 */
function createWriting({ config, db, logger, metrics, tracing }) {
  const policy = createWritePolicy(db, { lockTimeoutMs: config.dbLockTimeoutMs });
  // Every write asserts that it brings back no erased email; erasures are keyed by ERASURE_KEY.
  const erasures = createErasureGuard({ key: erasureKeyOf(config) });
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
    erasures,
  });
  const write = routeWrites({ config, writer, policy, metrics, tracing });
  // Traced, the write is a span of its own, parent of its statements (or linked from its group's).
  /** @type {import('./http/post-users.js').WriteUsers} */
  const writeUsers = tracing.enabled
    ? (part, resolution) =>
        tracing.inSpan(
          'sluice.write',
          { 'sluice.rows': part.rows.length, 'sluice.resolution': resolution },
          () => write(part, resolution),
        )
    : write;
  const importUsers = createStreamImport({ db, policy, keys, erasures });
  return { writeUsers, importUsers, quarantineBound, quarantinePurge, erasures, keys, policy };
}

/**
 * The route of a JSON request's write, by its size alone: a small one joins a group (group
 * commit), whatever it holds; any other is written alone, within half the pool.
 * @param {{ config: import('./config.js').Config,
 *   writer: import('./users/user-writer.js').UserWriter,
 *   policy: import('./users/write-policy.js').WritePolicy,
 *   metrics: import('./metrics.js').Metrics,
 *   tracing: import('./tracing/tracing.js').Tracing }} deps
 * @returns {import('./http/post-users.js').WriteUsers}
 */
function routeWrites({ config, writer, policy, metrics, tracing }) {
  /** @type {import('./http/post-users.js').WriteUsers} */
  const alone = async (part, resolution) => {
    const request = { kind: /** @type {const} */ ('batch'), rows: part.rows, resolution };
    const [outcome] = await writer.write({ ...request, parts: [part] });
    return outcome;
  };
  if (!config.groupCommit) return alone;
  const groupCommit = createGroupCommit({
    write: writer.write,
    policy,
    maxRows: config.groupCommitMaxRows,
    observe({ requests, rows, waitedSeconds }) {
      metrics.groupRequests.observe(requests);
      metrics.groupRows.observe(rows);
      for (const s of waitedSeconds) metrics.groupWait.observe(s);
    },
    tracing,
  });
  // Requests written alone take at most half the pool, never group commit's two write slots.
  const gate = createWriteGate(writeSlotsFor(config.dbPoolMax, GROUP_WRITE_SLOTS));
  return (part, resolution) =>
    part.received <= config.groupCommitSmallRows
      ? groupCommit.writeUsers(part, resolution)
      : gate(() => alone(part, resolution));
}

/**
 * POST /users's routes by a stream's media type, each admitted for what a stream holds at once.
 * @param {Parts} parts
 * @param {ReturnType<typeof createWriting>} writing
 * @param {Omit<Parameters<typeof admitRequest>[0], 'maxBodyBytes'>} admission
 */
function streamRoutes({ config, metrics }, { importUsers, quarantineBound }, admission) {
  const admit = admitRequest({
    ...admission,
    maxBodyBytes: config.maxStreamBytes,
    holdBytes: STREAM_HOLD_BYTES,
  });
  /** @type {Record<string, import('express').RequestHandler>} */
  const routes = {};
  for (const [type, format] of Object.entries(STREAM_TYPES)) {
    routes[type] = postUsersStream({
      format,
      importUsers,
      admit,
      maxStreamBytes: config.maxStreamBytes,
      idleTimeoutMs: config.streamIdleTimeoutMs,
      quarantineBound,
      metrics,
    });
  }
  return routes;
}

/**
 * Every route but the hot one: 405 on /users, the probes, /metrics, the OpenAPI document, the
 * JSON 404 and the error handler, last.
 * @param {import('express').Express} app
 * @param {Parts} parts
 */
function serveTheRest(app, { config, db, metrics, renderMetrics }) {
  // Any other method on /users: 405 with the method it serves (RFC 9110, 15.5.6).
  app.all('/users', (req, res, next) => {
    res.setHeader('Allow', 'POST, DELETE');
    next(
      new ApiError('method_not_allowed', `${req.method} /users is not served: send POST or DELETE`),
    );
  });
  app.all('/erasures', (req, res, next) => {
    res.setHeader('Allow', 'POST');
    next(new ApiError('method_not_allowed', `${req.method} /erasures is not served: send POST`));
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
}
