// OpenTelemetry's tracing SDK, loaded by server.js only when the OTEL_ variables ask for traces and
// before any module of the service. Traces only, put together from the SDK's parts rather than
// @opentelemetry/sdk-node, which loads the metrics and logs SDKs and every exporter (gRPC's
// included): 130 MiB of RSS at idle with it, 94 MiB without (89 MiB with tracing off; docs/tracing.md).
// Spans leave through a batch processor over OTLP/HTTP; the exporter reads OTEL_EXPORTER_OTLP_* itself.
import * as otel from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { defaultResource, detectResources, envDetector } from '@opentelemetry/resources';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import { enableSpans } from './spans.js';

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
  spanProcessors: [batchProcessor()],
});
otel.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
// W3C trace context in and out: the caller's traceparent is honoured.
otel.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
otel.trace.setGlobalTracerProvider(provider);
// No instrumentation library: the HTTP server span, the steps' and pg's spans are the service's own
// (spans.js, pg-spans.js), and logger.js adds the trace's ids to each line. Those libraries wrap
// every listener, router layer and query, and recorded what had then to be taken off again (a
// statement's text, an error's message).
// main.js flushes the last spans through flushSpans() before it exits on SIGTERM.
enableSpans(otel, () => provider.shutdown());
