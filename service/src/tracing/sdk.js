// OpenTelemetry's tracing SDK, loaded by tracing/tracing.js's startTracing only when the OTEL_
// variables ask for traces (read once, by the configuration: @sluice/env/tracing). Traces only,
// put together from the SDK's parts rather than @opentelemetry/sdk-node, which loads the metrics
// and logs SDKs and every exporter (gRPC's included): 130 MiB of RSS at idle with it, 94 MiB
// without (89 MiB with tracing off; docs/tracing.md). Spans leave through a batch processor over
// OTLP/HTTP, to the URL and with the settings the configuration holds.
import * as otel from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, ParentBasedSampler, TraceIdRatioBasedSampler, TracerProvider } from '@opentelemetry/sdk-trace';
import { OtelTracing } from './spans.js';

/** @typedef {import('@sluice/env/tracing').TracingConfig} TracingConfig */

/** @param {string | undefined} name */
function diagLevel(name) {
  const levels = /** @type {Record<string, otel.DiagLogLevel>} */ ({
    none: otel.DiagLogLevel.NONE, error: otel.DiagLogLevel.ERROR, warn: otel.DiagLogLevel.WARN, info: otel.DiagLogLevel.INFO,
    debug: otel.DiagLogLevel.DEBUG, verbose: otel.DiagLogLevel.VERBOSE, all: otel.DiagLogLevel.ALL,
  });
  return levels[(name ?? '').toLowerCase()] ?? otel.DiagLogLevel.WARN;
}

/**
 * The sampler OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG name (the spec's six; the ratio
 * checked to be from 0 to 1 by the configuration), parentbased_always_on by default.
 * @param {TracingConfig} config
 */
function samplerOf({ sampler, samplerRatio }) {
  const byRatio = () => new TraceIdRatioBasedSampler(samplerRatio);
  switch (sampler) {
    case 'always_on': return new AlwaysOnSampler();
    case 'always_off': return new AlwaysOffSampler();
    case 'traceidratio': return byRatio();
    case 'parentbased_always_off': return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio': return new ParentBasedSampler({ root: byRatio() });
    default: return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/**
 * OTLP over HTTP to the configured traces URL, protobuf unless the protocol is http/json, batched
 * as the OTEL_BSP_ variables say (the SDK's defaults for those unset).
 * @param {TracingConfig} config
 */
function batchProcessor({ tracesUrl, protocol, batch }) {
  const exporter = protocol === 'http/json' ? new OtlpJsonExporter({ url: tracesUrl }) : new OtlpProtobufExporter({ url: tracesUrl });
  return new BatchSpanProcessor({ exporter, ...batch });
}

/**
 * Starts the SDK as `config` says and returns the service's tracing over it. OpenTelemetry's
 * context manager and W3C propagator are the API's globals (a span's context is found through
 * them), and so is the tracer provider, for any library that asks the API for one.
 * @param {TracingConfig} config
 * @returns {import('./tracing.js').Tracing}
 */
export function startTracingSdk(config) {
  // The SDK's own messages on stderr (console.warn): stdout holds the service's JSON log only.
  otel.diag.setLogger(new otel.DiagConsoleLogger(), { logLevel: diagLevel(config.logLevel) });
  const provider = new TracerProvider({
    // OTEL_RESOURCE_ATTRIBUTES over the SDK's defaults, and the configured service.name over both.
    resource: defaultResource()
      .merge(detectResources({ detectors: [envDetector] }))
      .merge(resourceFromAttributes({ 'service.name': config.serviceName ?? 'sluice-service' })),
    sampler: samplerOf(config),
    // The batch processor: a span costs the request a queue push, export happens off its path.
    spanProcessors: [batchProcessor(config)],
  });
  otel.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  // W3C trace context in and out: the caller's traceparent is honoured.
  otel.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  otel.trace.setGlobalTracerProvider(provider);
  // No instrumentation library: the HTTP server span, the steps' and pg's spans are the service's
  // own (spans.js, pg-spans.js), and logger.js adds the trace's ids to each line. Those libraries
  // wrap every listener, router layer and query, and recorded what had then to be taken off again
  // (a statement's text, an error's message). main.js flushes the last spans (flush) before it
  // exits on SIGTERM.
  return new OtelTracing(otel, provider);
}
