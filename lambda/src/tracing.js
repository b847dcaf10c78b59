// The feeder's spans, as one object the composition root (handler.js) makes and hands to the
// feeder, as it hands it the logger. Off (the default), it is NO_TRACING, whose methods do nothing,
// and nothing is loaded. On (the OTEL_ variables, read once into @sluice/env/tracing's
// TracingConfig), only @opentelemetry/api is loaded and bundled: the SDK that records and exports
// spans is the ADOT Lambda layer's on AWS (template.yaml, TracingLayerArn), or the local runner's
// (lambda/local/tracing.js). Without either, the API's no-op tracer records nothing.
import { formatTraceparent, parseTraceparent, parseXrayHeader } from './traceparent.js';

/** @typedef {import('@opentelemetry/api').Span} Span */
/**
 * @typedef {object} TracedRecord  what the invocation span reads of an SQS record
 * @property {string} messageId
 * @property {Record<string, { stringValue?: string }>} [messageAttributes]
 * @property {{ AWSTraceHeader?: string }} [attributes]
 * @property {string} [eventSourceARN]
 */

/**
 * The producer's context of a message: its `traceparent` message attribute, else the X-Ray
 * header SQS adds when the sender was traced by X-Ray.
 * @param {TracedRecord} record
 */
export const producerContextOf = (record) =>
  parseTraceparent(record.messageAttributes?.traceparent?.stringValue) ?? parseXrayHeader(record.attributes?.AWSTraceHeader);

/**
 * What the feeder records spans through.
 * @typedef {object} FeederTracing
 * @property {(records: TracedRecord[], context: { awsRequestId?: string }) => Span | undefined} startInvocationSpan
 * @property {<T>(span: Span | undefined, fn: () => Promise<T>) => Promise<T>} runInSpan
 * @property {(span: Span | undefined, counts: Record<string, number>, err?: unknown) => void} endInvocationSpan
 * @property {() => string | undefined} currentTraceparent
 */

/** Tracing off: no span, `fn` run as it is, no header. @type {FeederTracing} */
export const NO_TRACING = Object.freeze({
  startInvocationSpan: () => undefined,
  runInSpan: (/** @type {Span | undefined} */ _span, /** @type {() => Promise<any>} */ fn) => fn(),
  endInvocationSpan: () => {},
  currentTraceparent: () => undefined,
});

/**
 * The feeder's tracing as `config` says: NO_TRACING when off, else spans made through the API
 * (imported only then; once per cold start, by the composition root).
 * @param {import('@sluice/env/tracing').TracingConfig} config
 * @returns {Promise<FeederTracing>}
 */
export async function loadFeederTracing(config) {
  if (!config.enabled) return NO_TRACING;
  return tracingOver(await import('@opentelemetry/api'));
}

/**
 * The feeder's spans over OpenTelemetry's API.
 * @param {typeof import('@opentelemetry/api')} api
 * @returns {FeederTracing}
 */
export function tracingOver(api) {
  return { startInvocationSpan, runInSpan, endInvocationSpan, currentTraceparent };

  /**
   * The invocation's span, as OpenTelemetry's messaging conventions have it for a batch received
   * from a queue: a CONSUMER span "process" (a child of the ADOT layer's invocation span on AWS, a
   * root locally), with one link to each message's producer context (not a parent: a batch has many).
   * @param {TracedRecord[]} records @param {{ awsRequestId?: string }} context
   * @returns {Span | undefined}
   */
  function startInvocationSpan(records, context) {
    const queue = records[0]?.eventSourceARN?.split(':').at(-1);
    /** @type {import('@opentelemetry/api').Link[]} */
    const links = [];
    for (const r of records) {
      const producer = producerContextOf(r);
      if (producer) links.push({ context: producer, attributes: { 'messaging.message.id': r.messageId } });
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

  /**
   * Runs `fn` with `span` active (the posts it makes carry its context); just `fn` without a span.
   * @template T @param {Span | undefined} span @param {() => Promise<T>} fn @returns {Promise<T>}
   */
  function runInSpan(span, fn) {
    if (!span) return fn();
    return api.context.with(api.trace.setSpan(api.context.active(), span), fn);
  }

  /**
   * Records the invocation's counts on its span and ends it (never a user: counts and ids only).
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

  /** The `traceparent` header for a request made now: the active span's, or undefined. */
  function currentTraceparent() {
    const span = api.trace.getActiveSpan();
    if (!span) return undefined;
    const context = span.spanContext();
    return api.trace.isSpanContextValid(context) ? formatTraceparent(context) : undefined;
  }
}
