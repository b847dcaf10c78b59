// The service's tracing (tracing-api.d.ts), handed to what records spans. Off, it is NO_TRACING,
// which does and allocates nothing, and no OpenTelemetry module is imported.

/** @typedef {import('./tracing-api.js').Tracing} Tracing */
/** @typedef {import('./tracing-api.js').Step} Step */
/** @typedef {import('@opentelemetry/api').Span} Span */

/** @param {any} x */
const same = (x) => x;
const nothing = () => undefined;

/** Tracing off: a listener or middleware is returned as it came. @type {Tracing} */
export const NO_TRACING = Object.freeze({
  enabled: false,
  tracedRequests: same,
  tracedMiddleware: (_name, middleware) => middleware,
  startStep: nothing,
  endStep: nothing,
  inSpan: (_name, _attributes, fn) => fn(),
  activeSpan: nothing,
  activeSpanSampled: () => false,
  startClientSpan: nothing,
  startGroupSpan: nothing,
  runInSpan: (_span, fn) => fn(),
  endSpan: nothing,
  traceFieldsOfLog: () => ({}),
  flush: () => Promise.resolve(),
});

/**
 * NO_TRACING when off, else the SDK started and the spans made through it.
 * @param {import('@sluice/env/tracing').TracingConfig} config @returns {Promise<Tracing>}
 */
export async function startTracing(config) {
  if (!config.enabled) return NO_TRACING;
  const { startTracingSdk } = await import('./sdk.js');
  return startTracingSdk(config);
}
