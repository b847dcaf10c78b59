// OpenTelemetry's tracing SDK, loaded only when tracing is on: traces only, from the SDK's parts
// (not sdk-node), no instrumentation library (spans.js and pg-spans.js make the spans).
import * as otel from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from '@opentelemetry/resources';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { OtelTracing } from './spans.js';

/** @typedef {import('@sluice/env/tracing').TracingConfig} TracingConfig */

/** @param {string | undefined} name */
function diagLevel(name) {
  /** @type {Record<string, otel.DiagLogLevel>} */
  const levels = {
    none: otel.DiagLogLevel.NONE,
    error: otel.DiagLogLevel.ERROR,
    warn: otel.DiagLogLevel.WARN,
    info: otel.DiagLogLevel.INFO,
    debug: otel.DiagLogLevel.DEBUG,
    verbose: otel.DiagLogLevel.VERBOSE,
    all: otel.DiagLogLevel.ALL,
  };
  return levels[(name ?? '').toLowerCase()] ?? otel.DiagLogLevel.WARN;
}

/**
 * OTEL_TRACES_SAMPLER's (and _ARG's); parentbased_always_on by default.
 * @param {TracingConfig} config
 */
function samplerOf({ sampler, samplerRatio }) {
  const byRatio = () => new TraceIdRatioBasedSampler(samplerRatio);
  switch (sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return byRatio();
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: byRatio() });
    default:
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/** Protobuf unless http/json, batched as OTEL_BSP_ says. @param {TracingConfig} config */
function batchProcessor({ tracesUrl, protocol, batch }) {
  const exporter =
    protocol === 'http/json'
      ? new OtlpJsonExporter({ url: tracesUrl })
      : new OtlpProtobufExporter({ url: tracesUrl });
  return new BatchSpanProcessor({ exporter, ...batch });
}

/**
 * Its context manager, propagator and provider made the API's globals.
 * @param {TracingConfig} config @returns {import('./tracing.js').Tracing}
 */
export function startTracingSdk(config) {
  // The SDK's messages on stderr: stdout holds the JSON log only.
  otel.diag.setLogger(new otel.DiagConsoleLogger(), { logLevel: diagLevel(config.logLevel) });
  const provider = new TracerProvider({
    resource: defaultResource()
      .merge(detectResources({ detectors: [envDetector] }))
      .merge(resourceFromAttributes({ 'service.name': config.serviceName ?? 'sluice-service' })),
    sampler: samplerOf(config),
    spanProcessors: [batchProcessor(config)],
  });
  otel.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  otel.propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  otel.trace.setGlobalTracerProvider(provider);
  return new OtelTracing(otel, provider);
}
