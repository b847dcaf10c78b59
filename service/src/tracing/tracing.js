// The service's tracing, as one object the composition root makes and hands to what records spans
// (the HTTP server, the request's steps, the writer, group commit, the pool, the logger), as it
// hands them the logger. Off, it is NO_TRACING, whose methods do nothing and allocate nothing, and
// not one OpenTelemetry module is imported: the SDK is loaded by startTracing only when asked for.

/** @typedef {import('@opentelemetry/api').Span} Span */
/** @typedef {import('@opentelemetry/api').Attributes} Attributes */
/**
 * A step of a request (admission, body read, validation), recorded as it runs and made a span
 * when the request ends (tracing/spans.js says why).
 * @typedef {{ name: string, start: number, end: number | undefined, err: unknown }} Step
 */

/**
 * What the service's parts record spans through (tracing/spans.js implements it over the SDK).
 * @typedef {object} Tracing
 * @property {boolean} enabled  whether spans are recorded: callers wrap a step only then
 * @property {(listener: import('node:http').RequestListener) => import('node:http').RequestListener} tracedRequests
 *   the HTTP server's listener with a SERVER span around each request; as is when off
 * @property {(name: string, middleware: import('express').RequestHandler) => import('express').RequestHandler} tracedMiddleware
 *   an Express middleware as a step of its request; as is when off
 * @property {(name: string) => Step | undefined} startStep  a step begins (undefined when off or sampled out)
 * @property {(step: Step | undefined, err?: unknown) => void} endStep  a step ends, failed when err is given
 * @property {<T>(name: string, attributes: Attributes, fn: () => Promise<T>) => Promise<T>} inSpan
 *   an async step in a span of its own (called only when enabled)
 * @property {() => Span | undefined} activeSpan  the span active in this async context
 * @property {() => boolean} activeSpanSampled  whether the active span is one the sampler kept
 * @property {(name: string, attributes: Attributes) => Span | undefined} startClientSpan
 *   a CLIENT span, child of the active one (a pg statement)
 * @property {(requestSpans: (Span | undefined)[], attributes: Attributes) => Span | undefined} startGroupSpan
 *   a group commit's statement span, linked to the sampled requests it carries
 * @property {<T>(span: Span, fn: () => T) => T} runInSpan  runs fn with span active
 * @property {(span: Span | undefined, err?: unknown) => void} endSpan  ends a span, failed when err is given
 * @property {() => { trace_id?: string, span_id?: string, trace_flags?: string }} traceFieldsOfLog
 *   the active span's ids for a log line (pino's mixin)
 * @property {(limitMs?: number) => Promise<void>} flush  exports what the SDK still holds, on the way out
 */

/** @param {any} x */
const same = (x) => x;
const nothing = () => undefined;

/** Tracing off: every method does nothing (a listener or middleware is returned as it came). @type {Tracing} */
export const NO_TRACING = Object.freeze({
  enabled: false,
  tracedRequests: same,
  tracedMiddleware: (/** @type {string} */ _name, /** @type {import('express').RequestHandler} */ middleware) => middleware,
  startStep: nothing,
  endStep: nothing,
  inSpan: (/** @type {string} */ _name, /** @type {Attributes} */ _attributes, /** @type {() => Promise<any>} */ fn) => fn(),
  activeSpan: nothing,
  activeSpanSampled: () => false,
  startClientSpan: nothing,
  startGroupSpan: nothing,
  runInSpan: (/** @type {Span} */ _span, /** @type {() => any} */ fn) => fn(),
  endSpan: nothing,
  traceFieldsOfLog: () => ({}),
  flush: () => Promise.resolve(),
});

/**
 * The service's tracing as `config` says: NO_TRACING when off, else the OpenTelemetry SDK started
 * (tracing/sdk.js, imported only then) and the spans made through it.
 * @param {import('@sluice/env/tracing').TracingConfig} config
 * @returns {Promise<Tracing>}
 */
export async function startTracing(config) {
  if (!config.enabled) return NO_TRACING;
  const { startTracingSdk } = await import('./sdk.js');
  return startTracingSdk(config);
}
