// The service's own spans over the OpenTelemetry API (the Tracing of tracing/tracing.js, made by
// tracing/sdk.js when tracing is on). Nothing of OpenTelemetry is imported here: the API comes in
// from the SDK that started it (the types below are erased).

/** @typedef {import('@opentelemetry/api').Span} Span */
/** @typedef {import('@opentelemetry/api').Attributes} Attributes */
/** @typedef {import('./tracing.js').Step} Step */
/** @typedef {import('./tracing.js').Tracing} Tracing */

/**
 * Whether a span is one the sampler kept (it records, and so would its children): the one rule
 * for a request left out. Each of the six samplers OTEL_TRACES_SAMPLER names would leave a child
 * of a span left out too (the parent-based ones follow the parent; traceidratio decides by the
 * trace's id, which the child shares; always_on leaves nothing out), so a request left out pays
 * neither for a child span (a step, its write, its statements) nor for a context to hold it, and
 * a group's statement neither hangs under nor links to it.
 * @param {Span | undefined} span
 */
export const sampled = (span) => span?.isRecording() === true;

/** Where a request's context holds its steps (tracedRequests). */
const STEPS = Symbol('sluice.steps');

/**
 * The time of a request's span and its steps, in epoch milliseconds to the microsecond, all read
 * from one clock: the SDK anchors each span of its own on Date.now() (whole milliseconds), so
 * steps a few microseconds long would seem to overlap.
 */
const clock = () => TIME_ORIGIN + performance.now();
const TIME_ORIGIN = performance.timeOrigin;

/** Probes and scrapes: not traced, they would outnumber the requests worth a trace. */
const UNTRACED = new Set(['/healthz', '/readyz', '/metrics']);

/** @param {string} url */
const pathOf = (url) => {
  const mark = url.indexOf('?');
  return mark === -1 ? url : url.slice(0, mark);
};

/**
 * Marks a span failed. Only the error's class and code go on it, never its message: a message may
 * quote what a client sent.
 * @param {Span} span @param {unknown} err
 */
function failSpan(span, err) {
  const e = /** @type {{ name?: unknown, code?: unknown }} */ (err ?? {});
  const type = typeof e.code === 'string' ? e.code : typeof e.name === 'string' ? e.name : 'error';
  span.setAttribute('error.type', type);
  span.setStatus({ code: 2 /* SpanStatusCode.ERROR */, message: type });
}

/**
 * The service's spans through one tracer of `provider`. Its methods are arrow functions: each may
 * be handed on alone (pino's mixin, a pool's connect listener).
 * @implements {Tracing}
 */
export class OtelTracing {
  enabled = true;
  #otel;
  #tracer;
  #provider;

  /**
   * @param {typeof import('@opentelemetry/api')} otel  the API, its context manager set
   * @param {{ getTracer: (name: string) => import('@opentelemetry/api').Tracer, shutdown: () => Promise<void> }} provider
   */
  constructor(otel, provider) {
    this.#otel = otel;
    this.#tracer = provider.getTracer('sluice-service');
    this.#provider = provider;
  }

  /**
   * On the way out: the spans the batch processor still holds are exported, for at most `limitMs`
   * (an unreachable receiver must not hold up a shutdown).
   * @param {number} [limitMs]
   */
  flush = async (limitMs = 2000) => {
    await Promise.race([this.#provider.shutdown().catch(() => {}), new Promise((resolve) => setTimeout(resolve, limitMs).unref())]);
  };

  /** The span active in this async context, or undefined. */
  activeSpan = () => this.#otel.trace.getActiveSpan();

  /** Whether the active span is one the sampler kept: its children would be too. */
  activeSpanSampled = () => sampled(this.#otel.trace.getActiveSpan());

  /**
   * A CLIENT span, a child of the active one, which the caller found sampled (activeSpanSampled:
   * checked before it names the span).
   * @param {string} name @param {Attributes} attributes
   */
  startClientSpan = (name, attributes) => this.#tracer.startSpan(name, { kind: this.#otel.SpanKind.CLIENT, attributes });

  /**
   * The active span's ids for a log line (pino's mixin, set by logger.js only when tracing is on),
   * named as OpenTelemetry's pino instrumentation names them. A new object each time: pino merges
   * the line's own fields into it.
   * @returns {{ trace_id?: string, span_id?: string, trace_flags?: string }}
   */
  traceFieldsOfLog = () => {
    const span = this.#otel.trace.getActiveSpan();
    if (!span) return {};
    const { traceId, spanId, traceFlags } = span.spanContext();
    return { trace_id: traceId, span_id: spanId, trace_flags: `0${traceFlags.toString(16)}` };
  };

  /**
   * Ends a span, marking it failed when `err` is given (failSpan: never the error's message).
   * @param {Span | undefined} span @param {unknown} [err]
   */
  endSpan = (span, err) => {
    if (!span) return;
    if (err !== undefined) failSpan(span, err);
    span.end();
  };

  /**
   * Runs `fn` with `span` as the active span (its database calls become its children).
   * @template T @param {Span} span @param {() => T} fn @returns {T}
   */
  runInSpan = (span, fn) => this.#otel.context.with(this.#otel.trace.setSpan(this.#otel.context.active(), span), fn);

  /**
   * Runs an async step in a span of its own, ended when it settles; in no span when its request
   * was left out by the sampler. Only called when tracing is on (callers check `enabled` once, when
   * they are built), so the off path has no closure.
   * @template T @param {string} name @param {Attributes} attributes @param {() => Promise<T>} fn @returns {Promise<T>}
   */
  inSpan = async (name, attributes, fn) => {
    const active = this.#otel.trace.getActiveSpan();
    if (active !== undefined && !sampled(active)) return fn();
    const span = this.#tracer.startSpan(name, { attributes });
    try {
      const result = await this.runInSpan(span, fn);
      span.end();
      return result;
    } catch (err) {
      this.endSpan(span, err);
      throw err;
    }
  };

  /**
   * A step begins, in the request being traced; undefined (and nothing allocated) when no request
   * is, or its request was sampled out. End it with endStep.
   *
   * A step is recorded as it happens and made a span when the request ends (tracedRequests): no
   * span is alive during the step and nothing switches context for it. Live step spans, each with a
   * context of its own and restored for the next step, cost a single-user request more than the
   * rest of its tracing did (docs/tracing.md).
   * @param {string} name @returns {Step | undefined}
   */
  startStep = (name) => {
    const steps = /** @type {Step[] | undefined} */ (this.#otel.context.active().getValue(STEPS));
    if (!steps) return undefined;
    /** @type {Step} */
    const step = { name, start: clock(), end: undefined, err: undefined };
    steps.push(step);
    return step;
  };

  /**
   * A step ends, failed when `err` is given. A step never ended (its middleware answered the
   * request itself: a refusal) ends with the request.
   * @param {Step | undefined} step @param {unknown} [err]
   */
  endStep = (step, err) => {
    if (!step) return;
    step.end = clock();
    step.err = err;
  };

  /**
   * An Express middleware as a step of the request (a span, a child of the request's, from its
   * call until it passes on with next).
   * @param {string} name @param {import('express').RequestHandler} middleware
   * @returns {import('express').RequestHandler}
   */
  tracedMiddleware = (name, middleware) => {
    const otel = this.#otel;
    return (req, res, next) => {
      const context = otel.context.active();
      const step = this.startStep(name);
      middleware(req, res, (/** @type {unknown} */ err) => {
        this.endStep(step, err === undefined || err === 'route' || err === 'router' ? undefined : err);
        // A step may pass on from a callback of the request's stream, which runs in the context the
        // socket was made in: then the request's context is put back for the next step.
        if (otel.context.active() === context) next(err);
        else otel.context.with(context, next, undefined, err);
      });
    };
  };

  /**
   * The HTTP server's listener with a SERVER span around each request (the caller's W3C
   * `traceparent` honoured), named by its route, with OpenTelemetry's HTTP attributes. Made here
   * rather than by @opentelemetry/instrumentation-http and -express: they wrap every listener,
   * emitter and router layer of the request, which cost a single-user request more than its own
   * spans (docs/tracing.md).
   * @param {import('node:http').RequestListener} listener
   * @returns {import('node:http').RequestListener}
   */
  tracedRequests = (listener) => (req, res) => {
    const path = pathOf(req.url ?? '/');
    if (UNTRACED.has(path)) return listener(req, res);
    const otel = this.#otel;
    const parent = otel.propagation.extract(otel.ROOT_CONTEXT, req.headers);
    const span = this.#startServerSpan(req, path, parent);
    /** @type {Step[]} */
    const steps = [];
    const context = otel.trace.setSpan(parent, span);
    // A response emits close once it is finished, or when its connection is lost before.
    res.once('close', () => this.#endRequest(req, res, span, steps, context));
    // A request the sampler left out records no steps: its spans would not be exported anyway.
    otel.context.with(sampled(span) ? context.setValue(STEPS, steps) : context, listener, undefined, req, res);
  };

  /**
   * @param {import('node:http').IncomingMessage} req @param {string} path
   * @param {import('@opentelemetry/api').Context} parent
   */
  #startServerSpan(req, path, parent) {
    const [host, port] = (req.headers.host ?? '').split(':');
    return this.#tracer.startSpan(req.method ?? 'HTTP', {
      kind: this.#otel.SpanKind.SERVER,
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
  }

  /**
   * The request's span ends, its steps made spans with the times they recorded.
   * @param {import('node:http').IncomingMessage} req @param {import('node:http').ServerResponse} res
   * @param {Span} span @param {Step[]} steps @param {import('@opentelemetry/api').Context} context
   */
  #endRequest(req, res, span, steps, context) {
    // Express leaves the route it matched on the request.
    const route = /** @type {{ route?: { path?: unknown } }} */ (/** @type {unknown} */ (req)).route?.path;
    if (typeof route === 'string') {
      span.setAttribute('http.route', route);
      span.updateName(`${req.method} ${route}`);
    }
    const now = clock();
    for (const step of steps) {
      const stepSpan = this.#tracer.startSpan(step.name, { startTime: step.start }, context);
      if (step.err !== undefined) failSpan(stepSpan, step.err);
      stepSpan.end(step.end ?? now);
    }
    span.setAttribute('http.response.status_code', res.statusCode);
    if (res.statusCode >= 500) {
      span.setAttribute('error.type', String(res.statusCode));
      span.setStatus({ code: this.#otel.SpanStatusCode.ERROR });
    }
    span.end(now);
  }

  /**
   * The group commit's statement span: a child of the oldest sampled request's write span, linked
   * to every sampled request it carries (OpenTelemetry's way for one operation done for many:
   * links, not parents). A request sampled out is neither parent nor link: its spans are never
   * exported, and a span under it would share its fate, leaving the group's sampled requests
   * without their statement. When no request of the group was sampled, a span that records nothing.
   * @param {(Span | undefined)[]} requestSpans @param {Attributes} attributes
   * @returns {Span}
   */
  startGroupSpan = (requestSpans, attributes) => {
    const otel = this.#otel;
    const kept = /** @type {Span[]} */ (requestSpans.filter(sampled));
    // A span that records nothing, for the statement to run under: its queries start no span, and
    // do not land under whichever request's context the group's write happened to begin in.
    if (kept.length === 0) return otel.trace.wrapSpanContext(otel.INVALID_SPAN_CONTEXT);
    const links = kept.map((s) => ({ context: s.spanContext() }));
    return this.#tracer.startSpan('sluice.group_commit.write', { attributes, links }, otel.trace.setSpan(otel.ROOT_CONTEXT, kept[0]));
  };
}
