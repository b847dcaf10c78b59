// The service's own spans, through this facade only: until tracing/sdk.js hands it the
// OpenTelemetry API, every function here is a no-op that allocates nothing, and nothing of
// OpenTelemetry is imported (the types below are erased).

/** @typedef {import('@opentelemetry/api').Span} Span */
/** @typedef {import('@opentelemetry/api').Attributes} Attributes */

/** @type {typeof import('@opentelemetry/api') | undefined} */
let api;
/** @type {import('@opentelemetry/api').Tracer | undefined} */
let tracer;

/** @type {() => Promise<void>} */
let shutdown = async () => {};

/**
 * Turns the spans on: called once by tracing/sdk.js, before the service is built.
 * @param {typeof import('@opentelemetry/api')} otel @param {() => Promise<void>} stop  flushes and stops the SDK
 */
export function enableSpans(otel, stop) {
  api = otel;
  tracer = otel.trace.getTracer('sluice-service');
  shutdown = stop;
}

/**
 * On the way out: the spans the batch processor still holds are exported, for at most `limitMs`
 * (an unreachable receiver must not hold up a shutdown). Nothing to do when off.
 * @param {number} [limitMs]
 */
export function flushSpans(limitMs = 2000) {
  if (!tracer) return Promise.resolve();
  return Promise.race([shutdown().catch(() => {}), new Promise((resolve) => setTimeout(resolve, limitMs).unref())]);
}

/** Whether spans are recorded: the composition root wraps its steps only then. */
export const tracingOn = () => tracer !== undefined;

/** The span active in this async context, or undefined (always, when tracing is off). */
export const activeSpan = () => api?.trace.getActiveSpan();

/**
 * A child of the active span, or undefined when tracing is off.
 * @param {string} name @param {Attributes} [attributes]
 * @returns {Span | undefined}
 */
export function startSpan(name, attributes) {
  return tracer?.startSpan(name, { attributes });
}

/**
 * Ends a span, marking it failed when `err` is given. Only the error's class and code go on the
 * span, never its message: a message may quote what a client sent.
 * @param {Span | undefined} span @param {unknown} [err]
 */
export function endSpan(span, err) {
  if (!span) return;
  if (err !== undefined) failSpan(span, err);
  span.end();
}

/** @param {Span} span @param {unknown} err */
function failSpan(span, err) {
  const e = /** @type {{ name?: unknown, code?: unknown }} */ (err ?? {});
  const type = typeof e.code === 'string' ? e.code : typeof e.name === 'string' ? e.name : 'error';
  span.setAttribute('error.type', type);
  span.setStatus({ code: 2 /* SpanStatusCode.ERROR */, message: type });
}

/**
 * Runs `fn` with `span` as the active span (its database calls become its children).
 * @template T @param {Span} span @param {() => T} fn @returns {T}
 */
export function runInSpan(span, fn) {
  if (!api) return fn();
  return api.context.with(api.trace.setSpan(api.context.active(), span), fn);
}

/**
 * Runs an async step in a span of its own, ended when it settles. Only called when tracing is on
 * (callers check tracingOn() once, when they are built), so the off path has no closure.
 * @template T @param {string} name @param {Attributes} attributes @param {() => Promise<T>} fn @returns {Promise<T>}
 */
export async function inSpan(name, attributes, fn) {
  const span = /** @type {Span} */ (startSpan(name, attributes));
  try {
    const result = await runInSpan(span, fn);
    span.end();
    return result;
  } catch (err) {
    endSpan(span, err);
    throw err;
  }
}

/**
 * Where a request's context holds its step spans not yet ended (tracedMiddleware), which end with
 * the request span. In the context rather than on the response: a property added to every
 * response changed its shape, which cost more than the span.
 */
const OPEN_STEPS = Symbol('sluice.open_steps');

/**
 * An Express middleware in a span of its own, a child of the request's, from its call until it
 * passes on (next) or, when it answers itself (a refusal), until the request span ends
 * (tracedRequests); returned as is when tracing is off. The step runs in the request's context,
 * not its own: nothing in a step starts a span, and a context switch into each step cost as much as
 * the span.
 * @param {string} name @param {import('express').RequestHandler} middleware
 * @returns {import('express').RequestHandler}
 */
export function tracedMiddleware(name, middleware) {
  if (!tracingOn()) return middleware;
  const otel = /** @type {typeof import('@opentelemetry/api')} */ (api);
  return (req, res, next) => {
    // A step may pass on from a callback of the request's stream, which runs in the context the
    // socket was made in: the request's context is put back for the next step.
    const context = otel.context.active();
    const span = /** @type {Span} */ (startSpan(name));
    const open = /** @type {Set<Span> | undefined} */ (context.getValue(OPEN_STEPS));
    open?.add(span);
    middleware(req, res, (/** @type {unknown} */ err) => {
      open?.delete(span);
      endSpan(span, err === undefined || err === 'route' || err === 'router' ? undefined : err);
      otel.context.with(context, next, undefined, err);
    });
  };
}

/** Probes and scrapes: not traced, they would outnumber the requests worth a trace. */
const UNTRACED = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * The HTTP server's listener with a SERVER span around each request (the caller's W3C
 * `traceparent` honoured), named by its route, with OpenTelemetry's HTTP attributes; returned as
 * is when tracing is off. Made here rather than by @opentelemetry/instrumentation-http and
 * -express: they wrap every listener, emitter and router layer of the request, which cost a
 * single-user request more than its own spans (docs/tracing.md).
 * @param {import('node:http').RequestListener} listener
 * @returns {import('node:http').RequestListener}
 */
export function tracedRequests(listener) {
  if (!api || !tracer) return listener;
  const otel = api;
  const spans = tracer;
  return (req, res) => {
    const path = pathOf(req.url ?? '/');
    if (UNTRACED.has(path)) return listener(req, res);
    const parent = otel.propagation.extract(otel.ROOT_CONTEXT, req.headers);
    const [host, port] = (req.headers.host ?? '').split(':');
    const span = spans.startSpan(req.method ?? 'HTTP', {
      kind: otel.SpanKind.SERVER,
      attributes: {
        'http.request.method': req.method,
        'url.path': path,
        'url.scheme': 'http',
        'server.address': host || undefined,
        'server.port': port ? Number(port) : undefined,
        'client.address': req.socket.remoteAddress,
        'network.protocol.version': req.httpVersion,
        'user_agent.original': req.headers['user-agent'],
      },
    }, parent);
    /** @type {Set<Span>} */
    const steps = new Set();
    let ended = false;
    const end = () => {
      if (ended) return;
      ended = true;
      // Express leaves the route it matched on the request.
      const route = /** @type {{ route?: { path?: unknown } }} */ (/** @type {unknown} */ (req)).route?.path;
      if (typeof route === 'string') {
        span.setAttribute('http.route', route);
        span.updateName(`${req.method} ${route}`);
      }
      for (const step of steps) step.end();
      span.setAttribute('http.response.status_code', res.statusCode);
      if (res.statusCode >= 500) {
        span.setAttribute('error.type', String(res.statusCode));
        span.setStatus({ code: otel.SpanStatusCode.ERROR });
      }
      span.end();
    };
    res.once('finish', end);
    res.once('close', end);
    otel.context.with(otel.trace.setSpan(parent, span).setValue(OPEN_STEPS, steps), listener, undefined, req, res);
  };
}

/** @param {string} url */
const pathOf = (url) => {
  const mark = url.indexOf('?');
  return mark === -1 ? url : url.slice(0, mark);
};

/**
 * The group commit's statement span: a child of the oldest request's write span, linked to every
 * request it carries (OpenTelemetry's way for one operation done for many: links, not parents).
 * @param {(Span | undefined)[]} requestSpans @param {Attributes} attributes
 * @returns {Span | undefined}
 */
export function startGroupSpan(requestSpans, attributes) {
  if (!api || !tracer) return undefined;
  const parent = requestSpans[0];
  const links = [];
  for (const s of requestSpans) if (s) links.push({ context: s.spanContext() });
  const ctx = parent ? api.trace.setSpan(api.ROOT_CONTEXT, parent) : api.ROOT_CONTEXT;
  return tracer.startSpan('sluice.group_commit.write', { attributes, links }, ctx);
}
