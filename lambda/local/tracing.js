// The OpenTelemetry SDK for the feeder's local runner and the producer, started only when the
// tracing configuration asks (the OTEL_ variables, read once into @sluice/env/tracing's
// TracingConfig): what the ADOT Lambda layer is on AWS. Spans leave through a batch processor over
// OTLP/HTTP (protobuf, or JSON when the protocol is http/json) to the configured URL; the sampler,
// the service name and the batch settings are the configuration's too, never read again here.

/** @typedef {import('@sluice/env/tracing').TracingConfig} TracingConfig */

/**
 * The sampler the configuration names (the spec's six), parentbased_always_on by default.
 * @param {typeof import('@opentelemetry/sdk-trace')} sdk @param {TracingConfig} config
 */
function samplerOf(sdk, { sampler, samplerRatio }) {
  const root = {
    always_on: () => new sdk.AlwaysOnSampler(),
    always_off: () => new sdk.AlwaysOffSampler(),
    traceidratio: () => new sdk.TraceIdRatioBasedSampler(samplerRatio),
  };
  if (sampler.startsWith('parentbased_')) {
    return new sdk.ParentBasedSampler({ root: root[/** @type {keyof typeof root} */ (sampler.slice('parentbased_'.length))]() });
  }
  return root[/** @type {keyof typeof root} */ (sampler)]();
}

/**
 * Starts the SDK when the configuration asks for traces; resolves with its shutdown (which
 * flushes the spans still held), or undefined when off.
 * @param {string} serviceName  the default service.name (the configuration's OTEL_SERVICE_NAME wins)
 * @param {TracingConfig} config
 * @returns {Promise<(() => Promise<void>) | undefined>}
 */
export async function startLocalTracing(serviceName, config) {
  if (!config.enabled) return undefined;
  const [{ startNodeSdk }, sdk, json, protobuf] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/exporter-trace-otlp-proto'),
  ]);
  const { OTLPTraceExporter } = config.protocol === 'http/json' ? json : protobuf;
  const node = startNodeSdk({
    logLevel: config.logLevel ?? 'warn',
    resourceAttributes: { 'service.name': config.serviceName ?? serviceName },
    sampler: samplerOf(sdk, config),
    spanProcessors: [new sdk.BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: config.tracesUrl }), ...config.batch })],
    // No propagator: the producer and the handler write their trace headers themselves (traceparent.js).
    propagators: [],
    // Traces only: no metrics or logs exported.
    metricReaders: [],
    logRecordProcessors: [],
  });
  return () => node.shutdown();
}
