// The feeder's spans, one object handed to it. Off, NO_TRACING and nothing loaded; on, only
// @opentelemetry/api: the SDK is the ADOT layer's on AWS, or the local runner's.
import { formatTraceparent, parseTraceparent, parseXrayHeader } from './traceparent.js';

/** @typedef {import('@opentelemetry/api').Span} Span */
/**
 * @typedef {{ messageId: string, messageAttributes?: Record<string, { stringValue?: string }>,
 *   attributes?: { AWSTraceHeader?: string }, eventSourceARN?: string }} TracedRecord
 */

/** Its `traceparent` attribute, else SQS's X-Ray header. @param {TracedRecord} record */
export const producerContextOf = (record) =>
  parseTraceparent(record.messageAttributes?.traceparent?.stringValue) ??
  parseXrayHeader(record.attributes?.AWSTraceHeader);

/**
 * @typedef {{ startInvocationSpan: (records: TracedRecord[], context: { awsRequestId?: string })
 *   => Span | undefined,
 *   runInSpan: <T>(span: Span | undefined, fn: () => Promise<T>) => Promise<T>,
 *   endInvocationSpan: (span: Span | undefined, counts: Record<string, number>, err?: unknown)
 *   => void, currentTraceparent: () => string | undefined }} FeederTracing
 */

/** @type {FeederTracing} */
export const NO_TRACING = Object.freeze({
  startInvocationSpan: () => undefined,
  runInSpan: (_span, fn) => fn(),
  endInvocationSpan: () => {},
  currentTraceparent: () => undefined,
});

/** @param {import('@sluice/env/tracing').TracingConfig} config @returns {Promise<FeederTracing>} */
export async function loadFeederTracing(config) {
  if (!config.enabled) return NO_TRACING;
  return tracingOver(await import('@opentelemetry/api'));
}

/** @param {typeof import('@opentelemetry/api')} api @returns {FeederTracing} */
export function tracingOver(api) {
  return {
    startInvocationSpan: (records, context) => startInvocationSpan(api, records, context),
    runInSpan,
    endInvocationSpan,
    currentTraceparent,
  };

  /**
   * `fn` with `span` active, so its posts carry its context.
   * @template T @param {Span | undefined} span @param {() => Promise<T>} fn @returns {Promise<T>}
   */
  function runInSpan(span, fn) {
    if (!span) return fn();
    return api.context.with(api.trace.setSpan(api.context.active(), span), fn);
  }

  /**
   * Counts only, never a user.
   * @param {Span | undefined} span @param {Record<string, number>} counts @param {unknown} [err]
   */
  function endInvocationSpan(span, counts, err) {
    if (!span) return;
    for (const [name, value] of Object.entries(counts)) span.setAttribute(`sluice.${name}`, value);
    if (err !== undefined) {
      span.setAttribute('error.type', /** @type {{ name?: string }} */ (err)?.name ?? 'error');
      span.setStatus({ code: 2 /* SpanStatusCode.ERROR */ });
    }
    span.end();
  }

  function currentTraceparent() {
    const span = api.trace.getActiveSpan();
    if (!span) return undefined;
    const context = span.spanContext();
    return api.trace.isSpanContextValid(context) ? formatTraceparent(context) : undefined;
  }
}

/**
 * OpenTelemetry's messaging conventions for a batch: linked to each producer, a batch has many.
 * @param {typeof import('@opentelemetry/api')} api @param {TracedRecord[]} records
 * @param {{ awsRequestId?: string }} context @returns {Span | undefined}
 */
function startInvocationSpan(api, records, context) {
  const queue = records[0]?.eventSourceARN?.split(':').at(-1);
  /** @type {import('@opentelemetry/api').Link[]} */
  const links = [];
  for (const r of records) {
    const producer = producerContextOf(r);
    if (producer)
      links.push({ context: producer, attributes: { 'messaging.message.id': r.messageId } });
  }
  return api.trace.getTracer('sluice-feeder').startSpan(`process ${queue ?? 'sqs'}`, {
    kind: api.SpanKind.CONSUMER,
    links,
    attributes: {
      'messaging.system': 'aws_sqs',
      'messaging.operation.type': 'process',
      'messaging.operation.name': 'process',
      'messaging.batch.message_count': records.length,
      ...(queue ? { 'messaging.destination.name': queue } : {}),
      ...(context.awsRequestId ? { 'faas.invocation_id': context.awsRequestId } : {}),
    },
  });
}
