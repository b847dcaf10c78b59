// OpenTelemetry's tracing SDK, loaded by server.js only when the OTEL_ variables ask for traces and
// before any module of the service, so that the instrumentations' import hooks see http, express,
// pg and pino arrive. Traces only, put together from the SDK's parts rather than
// @opentelemetry/sdk-node, which loads the metrics and logs SDKs and every exporter (gRPC's
// included): 130 MiB of RSS at idle with it, 113 MiB without (90 MiB with tracing off). Spans leave through a
// batch processor over OTLP/HTTP; the exporter reads OTEL_EXPORTER_OTLP_* itself.
import { register } from 'node:module';
import * as otel from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { defaultResource, detectResources, envDetector } from '@opentelemetry/resources';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { PinoInstrumentation } from '@opentelemetry/instrumentation-pino';
import { AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import { createAddHookMessageChannel } from 'import-in-the-middle';
import { operationOf, rowCountOf } from './pg-spans.js';
import { enableSpans } from './spans.js';

// Only the modules an instrumentation asks for are wrapped by the ESM hook, not every import.
const { registerOptions, waitForAllMessagesAcknowledged } = createAddHookMessageChannel();
register('import-in-the-middle/hook.mjs', import.meta.url, registerOptions);

process.env.OTEL_SERVICE_NAME ||= 'sluice-service';
// The SDK's own messages on stderr (console.warn): stdout holds the service's JSON log only.
otel.diag.setLogger(new otel.DiagConsoleLogger(), { logLevel: diagLevel(process.env.OTEL_LOG_LEVEL) });

/** @param {string | undefined} name */
function diagLevel(name) {
  const levels = /** @type {Record<string, otel.DiagLogLevel>} */ ({
    none: otel.DiagLogLevel.NONE, error: otel.DiagLogLevel.ERROR, warn: otel.DiagLogLevel.WARN, info: otel.DiagLogLevel.INFO,
    debug: otel.DiagLogLevel.DEBUG, verbose: otel.DiagLogLevel.VERBOSE, all: otel.DiagLogLevel.ALL,
  });
  return levels[(name ?? '').toLowerCase()] ?? otel.DiagLogLevel.WARN;
}

/**
 * The sampler OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG name (the spec's six; checked by
 * env/src/tracing.js before this loads), parentbased_always_on by default.
 */
function samplerFromEnv() {
  const ratio = Number(process.env.OTEL_TRACES_SAMPLER_ARG || 1);
  const byRatio = () => new TraceIdRatioBasedSampler(Number.isFinite(ratio) && ratio >= 0 && ratio <= 1 ? ratio : 1);
  switch (process.env.OTEL_TRACES_SAMPLER) {
    case 'always_on': return new AlwaysOnSampler();
    case 'always_off': return new AlwaysOffSampler();
    case 'traceidratio': return byRatio();
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: byRatio() });
    default: return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/**
 * What may hold user data on a span, taken off before it is exported: a statement's text and
 * values (pg-format inlines the users it writes), and an exception's message and stack (a
 * database error may quote a value). A span keeps the operation (db.operation.name), the row
 * count and the error's type.
 * @type {import('@opentelemetry/sdk-trace').SpanProcessor}
 */
const withoutUserData = {
  onStart() {},
  onEnd(span) {
    const attributes = /** @type {Record<string, unknown>} */ (span.attributes);
    delete attributes['db.query.text'];
    delete attributes['db.statement'];
    delete attributes['db.postgresql.values'];
    for (const event of span.events) {
      if (event.name !== 'exception' || !event.attributes) continue;
      const e = /** @type {Record<string, unknown>} */ (event.attributes);
      delete e['exception.message'];
      delete e['exception.stacktrace'];
    }
  },
  forceFlush: async () => {},
  shutdown: async () => {},
};

/**
 * OTLP over HTTP, protobuf unless OTEL_EXPORTER_OTLP_PROTOCOL says http/json, batched as the
 * OTEL_BSP_ variables say (the SDK reads them only for processors it makes itself).
 */
function batchProcessor() {
  const protocol = process.env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || process.env.OTEL_EXPORTER_OTLP_PROTOCOL;
  const exporter = protocol === 'http/json' ? new OtlpJsonExporter() : new OtlpProtobufExporter();
  /** @param {string} name */
  const setting = (name) => {
    const value = Number(process.env[name] || Number.NaN);
    return Number.isFinite(value) && value >= 0 ? value : undefined;
  };
  return new BatchSpanProcessor({
    exporter,
    maxQueueSize: setting('OTEL_BSP_MAX_QUEUE_SIZE'),
    scheduledDelayMillis: setting('OTEL_BSP_SCHEDULE_DELAY'),
    exportTimeoutMillis: setting('OTEL_BSP_EXPORT_TIMEOUT'),
    maxExportBatchSize: setting('OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
  });
}

const provider = new TracerProvider({
  // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, over the SDK's defaults.
  resource: defaultResource().merge(detectResources({ detectors: [envDetector] })),
  sampler: samplerFromEnv(),
  // The batch processor: a span costs the request a queue push, export happens off its path.
  // It runs after withoutUserData, so nothing it exports holds a statement's text.
  spanProcessors: [withoutUserData, batchProcessor()],
});
otel.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
// W3C trace context in and out: the caller's traceparent is honoured.
otel.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
otel.trace.setGlobalTracerProvider(provider);
registerInstrumentations({
  tracerProvider: provider,
  instrumentations: [
    // The HTTP server span is the service's own (spans.js tracedRequests): the http and express
    // instrumentations cost a single-user request more than the rest of its tracing.
    new PgInstrumentation({
      // The span is named by the operation (INSERT, COPY…), not the statement's first words.
      requestHook: (span, { query, connection }) => {
        const operation = operationOf(query.text);
        if (!operation) return;
        span.setAttribute('db.operation.name', operation);
        span.updateName(`${operation} ${connection.database ?? 'postgresql'}`);
      },
      responseHook: (span, { data }) => {
        const rows = rowCountOf(data);
        if (rows !== undefined) span.setAttribute('db.response.returned_rows', rows);
      },
      // Only pg calls made for a traced request; no span per pool checkout.
      requireParentSpan: true,
      ignoreConnectSpans: true,
      enhancedDatabaseReporting: false,
    }),
    // trace_id and span_id on every log line written while a span is active; pino's lines stay on
    // stdout (no log sending).
    new PinoInstrumentation({ disableLogSending: true }),
  ],
});
await waitForAllMessagesAcknowledged();
// main.js flushes the last spans through flushSpans() before it exits on SIGTERM.
enableSpans(otel, () => provider.shutdown());
