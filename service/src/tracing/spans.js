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

/** Whether the active span records (a traced request the sampler kept): its children would too. */
export const activeSpanRecords = () => api?.trace.getActiveSpan()?.isRecording() === true;

/**
 * A CLIENT span, a child of the active one, which the caller found recording (activeSpanRecords:
 * checked before it names the span); undefined when tracing is off.
 * @param {string} name @param {Attributes} attributes
 * @returns {Span | undefined}
 */
export function startClientSpan(name, attributes) {
  if (!api || !tracer) return undefined;
  return tracer.startSpan(name, { kind: api.SpanKind.CLIENT, attributes });
}

/**
 * The active span's ids for a log line (pino's mixin, set by logger.js only when tracing is on),
 * named as OpenTelemetry's pino instrumentation names them. A new object each time: pino merges
 * the line's own fields into it.
 * @returns {{ trace_id?: string, span_id?: string, trace_flags?: string }}
 */
export function traceFieldsOfLog() {
  const span = api?.trace.getActiveSpan();
  if (!span) return {};
  const { traceId, spanId, traceFlags } = span.spanContext();
  return { trace_id: traceId, span_id: spanId, trace_flags: `0${traceFlags.toString(16)}` };
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
 * Whether the active span was left out by the sampler: then no child of it is started. Each of
 * the six samplers OTEL_TRACES_SAMPLER names would leave the child out too (the parent-based ones
 * follow the parent; traceidratio decides by the trace's id, which the child shares; always_on
 * leaves nothing out), so the request pays neither for the child nor for a context to hold it.
 */
const leftOut = () => {
  const active = api?.trace.getActiveSpan();
  return active !== undefined && !active.isRecording();
};

/**
 * Runs an async step in a span of its own, ended when it settles; in no span when its request was
 * sampled out. Only called when tracing is on (callers check tracingOn() once, when they are
 * built), so the off path has no closure.
 * @template T @param {string} name @param {Attributes} attributes @param {() => Promise<T>} fn @returns {Promise<T>}
 */
export async function inSpan(name, attributes, fn) {
  if (leftOut()) return fn();
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
 * A step of a request (admission, body read, validation): when it began and ended, and how it
 * failed. Recorded as it happens, made a span when the request ends (tracedRequests): no span is
 * alive during the step and nothing switches context for it. Live step spans, each with a context
 * of its own and restored for the next step, cost a single-user request more than the rest of its
 * tracing did (docs/tracing.md).
 * @typedef {{ name: string, start: number, end: number | undefined, err: unknown }} Step
 */

/** Where a request's context holds its steps (tracedRequests). */
const STEPS = Symbol('sluice.steps');

/**
 * The time of a request's span and its steps, in epoch milliseconds to the microsecond, all read
 * from one clock: the SDK anchors each span of its own on Date.now() (whole milliseconds), so
 * steps a few microseconds long would seem to overlap.
 */
const clock = () => TIME_ORIGIN + performance.now();
const TIME_ORIGIN = performance.timeOrigin;

/**
 * A step begins, in the request being traced; undefined (and nothing allocated) when tracing is
 * off or no request is. End it with endStep.
 * @param {string} name @returns {Step | undefined}
 */
export function startStep(name) {
  const steps = /** @type {Step[] | undefined} */ (api?.context.active().getValue(STEPS));
  if (!steps) return undefined;
  /** @type {Step} */
  const step = { name, start: clock(), end: undefined, err: undefined };
  steps.push(step);
  return step;
}

/**
 * A step ends, failed when `err` is given. A step never ended (its middleware answered the
 * request itself: a refusal) ends with the request.
 * @param {Step | undefined} step @param {unknown} [err]
 */
export function endStep(step, err) {
  if (!step) return;
  step.end = clock();
  step.err = err;
}

/**
 * An Express middleware as a step of the request (a span, a child of the request's, from its
 * call until it passes on with next); returned as is when tracing is off.
 * @param {string} name @param {import('express').RequestHandler} middleware
 * @returns {import('express').RequestHandler}
 */
export function tracedMiddleware(name, middleware) {
  if (!tracingOn()) return middleware;
  const otel = /** @type {typeof import('@opentelemetry/api')} */ (api);
  return (req, res, next) => {
    const context = otel.context.active();
    const step = startStep(name);
    middleware(req, res, (/** @type {unknown} */ err) => {
      endStep(step, err === undefined || err === 'route' || err === 'router' ? undefined : err);
      // A step may pass on from a callback of the request's stream, which runs in the context the
      // socket was made in: then the request's context is put back for the next step.
      if (otel.context.active() === context) next(err);
      else otel.context.with(context, next, undefined, err);
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
      startTime: clock(),
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
    /** @type {Step[]} */
    const steps = [];
    const context = otel.trace.setSpan(parent, span);
    const end = () => {
      // Express leaves the route it matched on the request.
      const route = /** @type {{ route?: { path?: unknown } }} */ (/** @type {unknown} */ (req)).route?.path;
      if (typeof route === 'string') {
        span.setAttribute('http.route', route);
        span.updateName(`${req.method} ${route}`);
      }
      const now = clock();
      for (const step of steps) {
        const stepSpan = spans.startSpan(step.name, { startTime: step.start }, context);
        if (step.err !== undefined) failSpan(stepSpan, step.err);
        stepSpan.end(step.end ?? now);
      }
      span.setAttribute('http.response.status_code', res.statusCode);
      if (res.statusCode >= 500) {
        span.setAttribute('error.type', String(res.statusCode));
        span.setStatus({ code: otel.SpanStatusCode.ERROR });
      }
      span.end(now);
    };
    // A response emits close once it is finished, or when its connection is lost before.
    res.once('close', end);
    // A request the sampler left out records no steps: its spans would not be exported anyway.
    otel.context.with(span.isRecording() ? context.setValue(STEPS, steps) : context, listener, undefined, req, res);
  };
}

/** @param {string} url */
const pathOf = (url) => {
  const mark = url.indexOf('?');
  return mark === -1 ? url : url.slice(0, mark);
};

/**
 * The group commit's statement span: a child of the oldest sampled request's write span, linked to
 * every sampled request it carries (OpenTelemetry's way for one operation done for many: links,
 * not parents). A request sampled out is neither parent nor link: its spans are never exported,
 * and a span under it would share its fate, leaving the group's sampled requests without their
 * statement. When no request of the group was sampled, a span that records nothing.
 * @param {(Span | undefined)[]} requestSpans @param {Attributes} attributes
 * @returns {Span | undefined}
 */
export function startGroupSpan(requestSpans, attributes) {
  if (!api || !tracer) return undefined;
  const sampled = requestSpans.filter((s) => s?.isRecording());
  // A span that records nothing, for the statement to run under: its queries start no span, and
  // do not land under whichever request's context the group's write happened to begin in.
  if (sampled.length === 0) return api.trace.wrapSpanContext(api.INVALID_SPAN_CONTEXT);
  const links = sampled.map((s) => ({ context: /** @type {Span} */ (s).spanContext() }));
  return tracer.startSpan('sluice.group_commit.write', { attributes, links }, api.trace.setSpan(api.ROOT_CONTEXT, /** @type {Span} */ (sampled[0])));
}
