// The feeder's spans. Off (the default), nothing is loaded and every function here is a no-op.
// On (the OTEL_ variables, @sluice/env/tracing), only @opentelemetry/api is loaded and bundled: the
// SDK that records and exports spans is the ADOT Lambda layer's on AWS (template.yaml,
// TracingLayerArn), or the local runner's (lambda/local/tracing.js). Without either, the API's
// no-op tracer records nothing.
import { tracingRequested } from '@sluice/env';
import { formatTraceparent, parseTraceparent, parseXrayHeader } from './traceparent.js';

/** @typedef {import('@opentelemetry/api').Span} Span */
/**
 * @typedef {object} TracedRecord  what the invocation span reads of an SQS record
 * @property {string} messageId
 * @property {Record<string, { stringValue?: string }>} [messageAttributes]
 * @property {{ AWSTraceHeader?: string }} [attributes]
 * @property {string} [eventSourceARN]
 */

/** @type {typeof import('@opentelemetry/api') | undefined} */
let api;

/**
 * Loads the API when the environment asks for traces; once per cold start.
 * @param {NodeJS.ProcessEnv} [env]
 */
export async function loadTracing(env = process.env) {
  if (api || !tracingRequested(env)) return;
  api = await import('@opentelemetry/api');
}

/**
 * The producer's context of a message: its `traceparent` message attribute, else the X-Ray
 * header SQS adds when the sender was traced by X-Ray.
 * @param {TracedRecord} record
 */
export const producerContextOf = (record) =>
  parseTraceparent(record.messageAttributes?.traceparent?.stringValue) ?? parseXrayHeader(record.attributes?.AWSTraceHeader);

/**
 * The invocation's span, as OpenTelemetry's messaging conventions have it for a batch received
 * from a queue: a CONSUMER span "process" (a child of the ADOT layer's invocation span on AWS, a root
 * locally), with one link to each message's
 * producer context (not a parent: a batch has many). Undefined when tracing is off.
 * @param {TracedRecord[]} records @param {{ awsRequestId?: string }} context
 * @returns {Span | undefined}
 */
export function startInvocationSpan(records, context) {
  if (!api) return undefined;
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
 * Runs `fn` with `span` active (the posts it makes carry its context); just `fn` when off.
 * @template T @param {Span | undefined} span @param {() => Promise<T>} fn @returns {Promise<T>}
 */
export function runInSpan(span, fn) {
  if (!api || !span) return fn();
  return api.context.with(api.trace.setSpan(api.context.active(), span), fn);
}

/**
 * Records the invocation's counts on its span and ends it (never a user: counts and ids only).
 * @param {Span | undefined} span @param {Record<string, number>} counts @param {unknown} [err]
 */
export function endInvocationSpan(span, counts, err) {
  if (!span) return;
  for (const [name, value] of Object.entries(counts)) span.setAttribute(`sluice.${name}`, value);
  if (err !== undefined) {
    span.setAttribute('error.type', /** @type {{ name?: string }} */ (err)?.name ?? 'error');
    span.setStatus({ code: 2 /* SpanStatusCode.ERROR */ });
  }
  span.end();
}

/** The `traceparent` header for a request made now: the active span's, or undefined. */
export function currentTraceparent() {
  const span = api?.trace.getActiveSpan();
  if (!span) return undefined;
  const context = span.spanContext();
  return api?.trace.isSpanContextValid(context) ? formatTraceparent(context) : undefined;
}
