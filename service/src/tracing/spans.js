// The service's spans over the OpenTelemetry API (tracing.js's Tracing, made by sdk.js when tracing
// is on). Nothing of OpenTelemetry is imported here: the API comes in from the SDK that started it.
import { DatabaseFailure } from '../errors.js';

/** @typedef {import('@opentelemetry/api').Span} Span */
/** @typedef {import('@opentelemetry/api').Attributes} Attributes */
/** @typedef {import('./tracing.js').Step} Step */
/** @typedef {import('./tracing.js').Tracing} Tracing */
/** @typedef {import('@opentelemetry/api').Context} Context */
/** @typedef {import('node:http').IncomingMessage} IncomingMessage */
/** @typedef {import('node:http').RequestListener} RequestListener */
/** @typedef {import('express').RequestHandler} RequestHandler */

/** Every sampler leaves out the children of one it left out. @param {Span | undefined} span */
export const sampled = (span) => span?.isRecording() === true;

const STEPS = Symbol('sluice.steps');

// A request's span and its steps read one clock, to the microsecond (the SDK's own is Date.now()).
const clock = () => TIME_ORIGIN + performance.now();
const TIME_ORIGIN = performance.timeOrigin;

// Probes and scrapes are not traced: they would outnumber the requests worth a trace.
const UNTRACED = new Set(['/healthz', '/readyz', '/metrics']);

/** @param {string} url */
const pathOf = (url) => {
  const mark = url.indexOf('?');
  return mark === -1 ? url : url.slice(0, mark);
};

/**
 * By the error's code or class (a database failure's cause's), never its message (it may quote
 * what a client sent).
 * @param {Span} span @param {unknown} err
 */
function failSpan(span, err) {
  /** @type {{ name?: unknown, code?: unknown }} */
  const e = (err instanceof DatabaseFailure ? err.cause : err) ?? {};
  const type = typeof e.code === 'string' ? e.code : typeof e.name === 'string' ? e.name : 'error';
  span.setAttribute('error.type', type);
  span.setStatus({ code: 2 /* SpanStatusCode.ERROR */, message: type });
}

/**
 * The service's spans through one tracer; arrow-function methods, so each may be handed on alone.
 * @implements {Tracing}
 */
export class OtelTracing {
  enabled = true;
  #otel;
  #tracer;
  #provider;

  /**
   * @param {typeof import('@opentelemetry/api')} otel
   * @param {{ getTracer: (name: string) => import('@opentelemetry/api').Tracer,
   *   shutdown: () => Promise<void> }} provider
   */
  constructor(otel, provider) {
    this.#otel = otel;
    this.#tracer = provider.getTracer('sluice-service');
    this.#provider = provider;
  }

  /** An unreachable receiver must not hold up a shutdown. @param {number} [limitMs] */
  flush = async (limitMs = 2000) => {
    await Promise.race([
      this.#provider.shutdown().catch(() => {}),
      new Promise((resolve) => setTimeout(resolve, limitMs).unref()),
    ]);
  };

  activeSpan = () => this.#otel.trace.getActiveSpan();

  activeSpanSampled = () => sampled(this.#otel.trace.getActiveSpan());

  /** Its caller checked sampling. @param {string} name @param {Attributes} attributes */
  startClientSpan = (name, attributes) =>
    this.#tracer.startSpan(name, { kind: this.#otel.SpanKind.CLIENT, attributes });

  /**
   * pino's mixin: a new object, pino merges into it.
   * @returns {{ trace_id?: string, span_id?: string, trace_flags?: string }}
   */
  traceFieldsOfLog = () => {
    const span = this.#otel.trace.getActiveSpan();
    if (!span) return {};
    const { traceId, spanId, traceFlags } = span.spanContext();
    return { trace_id: traceId, span_id: spanId, trace_flags: `0${traceFlags.toString(16)}` };
  };

  /** @param {Span | undefined} span @param {unknown} [err]  given: the span failed */
  endSpan = (span, err) => {
    if (!span) return;
    if (err !== undefined) failSpan(span, err);
    span.end();
  };

  /** @template T @param {Span} span @param {() => T} fn @returns {T} */
  runInSpan = (span, fn) =>
    this.#otel.context.with(this.#otel.trace.setSpan(this.#otel.context.active(), span), fn);

  /**
   * Ended when it settles; none when sampled out.
   * @template T @param {string} name @param {Attributes} attributes
   * @param {() => Promise<T>} fn @returns {Promise<T>}
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

  // A step of the traced request begins (undefined: none is, or it was sampled out): recorded, made
  // a span when the request ends.
  /** @param {string} name @returns {Step | undefined} */
  startStep = (name) => {
    const steps = /** @type {Step[] | undefined} */ (this.#otel.context.active().getValue(STEPS));
    if (!steps) return undefined;
    /** @type {Step} */
    const step = { name, start: clock(), end: undefined, err: undefined };
    steps.push(step);
    return step;
  };

  /** One not ended ends with its request. @param {Step | undefined} step @param {unknown} [err] */
  endStep = (step, err) => {
    if (!step) return;
    step.end = clock();
    step.err = err;
  };

  /** @param {string} name @param {RequestHandler} middleware @returns {RequestHandler} */
  tracedMiddleware = (name, middleware) => {
    const otel = this.#otel;
    return (req, res, next) => {
      const context = otel.context.active();
      const step = this.startStep(name);
      middleware(req, res, (/** @type {unknown} */ err) => {
        this.endStep(
          step,
          err === undefined || err === 'route' || err === 'router' ? undefined : err,
        );
        // Passed on from a stream's callback (the socket's context): the request's is put back.
        if (otel.context.active() === context) next(err);
        else otel.context.with(context, next, undefined, err);
      });
    };
  };

  // A SERVER span a request, named by its route; made here, not by instrumentation-http/-express,
  // which wrap every listener and router layer.
  /** @param {RequestListener} listener @returns {RequestListener} */
  tracedRequests = (listener) => (req, res) => {
    const path = pathOf(req.url ?? '/');
    if (UNTRACED.has(path)) return listener(req, res);
    const otel = this.#otel;
    const parent = otel.propagation.extract(otel.ROOT_CONTEXT, req.headers);
    const span = this.#startServerSpan(req, path, parent);
    /** @type {Step[]} */
    const steps = [];
    const context = otel.trace.setSpan(parent, span);
    res.once('close', () => this.#endRequest(req, res, span, steps, context));
    otel.context.with(
      sampled(span) ? context.setValue(STEPS, steps) : context,
      listener,
      undefined,
      req,
      res,
    );
  };

  /** @param {IncomingMessage} req @param {string} path @param {Context} parent */
  #startServerSpan(req, path, parent) {
    const [host, port] = (req.headers.host ?? '').split(':');
    return this.#tracer.startSpan(
      req.method ?? 'HTTP',
      {
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
      },
      parent,
    );
  }

  /**
   * @param {IncomingMessage} req @param {import('node:http').ServerResponse} res @param {Span} span
   * @param {Step[]} steps @param {Context} context
   */
  #endRequest(req, res, span, steps, context) {
    const route = /** @type {{ route?: { path?: unknown } }} */ (/** @type {unknown} */ (req)).route
      ?.path;
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

  // The group commit's statement span: under the oldest sampled request's write span, linked to
  // every sampled request it carries. None sampled: a span recording nothing, so the statement
  // lands under no request.
  /** @param {(Span | undefined)[]} requestSpans @param {Attributes} attributes @returns {Span} */
  startGroupSpan = (requestSpans, attributes) => {
    const otel = this.#otel;
    const kept = /** @type {Span[]} */ (requestSpans.filter(sampled));
    if (kept.length === 0) return otel.trace.wrapSpanContext(otel.INVALID_SPAN_CONTEXT);
    const links = kept.map((s) => ({ context: s.spanContext() }));
    return this.#tracer.startSpan(
      'sluice.group_commit.write',
      { attributes, links },
      otel.trace.setSpan(otel.ROOT_CONTEXT, kept[0]),
    );
  };
}
