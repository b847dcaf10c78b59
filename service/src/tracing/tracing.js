// The service's tracing (tracing-api.d.ts), handed to what records spans. Off, it is NO_TRACING,
// which does and allocates nothing, and no OpenTelemetry module is imported.

/** @typedef {import('./tracing-api.js').Tracing} Tracing */
/** @typedef {import('./tracing-api.js').Step} Step */
/** @typedef {import('@opentelemetry/api').Span} Span */

/** @param {any} x */
const same = (x) => x;
const nothing = () => undefined;

/**
 * Tracing off: every method does nothing (a listener or middleware is returned as it came).
 * @type {Tracing}
 */
export const NO_TRACING = Object.freeze({
  enabled: false,
  tracedRequests: same,
  tracedMiddleware: (
    /** @type {string} */ _name,
    /** @type {import('express').RequestHandler} */ middleware,
  ) => middleware,
  startStep: nothing,
  endStep: nothing,
  inSpan: (
    /** @type {string} */ _name,
    /** @type {import('@opentelemetry/api').Attributes} */ _attributes,
    /** @type {() => Promise<any>} */ fn,
  ) => fn(),
  activeSpan: nothing,
  activeSpanSampled: () => false,
  startClientSpan: nothing,
  startGroupSpan: nothing,
  runInSpan: (
    /** @type {import('@opentelemetry/api').Span} */ _span,
    /** @type {() => any} */ fn,
  ) => fn(),
  endSpan: nothing,
  traceFieldsOfLog: () => ({}),
  flush: () => Promise.resolve(),
});

/**
 * NO_TRACING when off, else the SDK started and the spans made through it.
 * @param {import('@sluice/env/tracing').TracingConfig} config
 * @returns {Promise<Tracing>}
 */
export async function startTracing(config) {
  if (!config.enabled) return NO_TRACING;
  const { startTracingSdk } = await import('./sdk.js');
  return startTracingSdk(config);
}
