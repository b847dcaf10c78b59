// The OpenTelemetry SDK of the local runner and the producer (the ADOT layer's part on AWS),
// started only when the TracingConfig asks; everything it uses comes from that configuration.

/** @typedef {import('@sluice/env/tracing').TracingConfig} TracingConfig */

/** The sampler the configuration names. @param {typeof import('@opentelemetry/sdk-trace')} sdk @param {TracingConfig} config */
function samplerOf(sdk, { sampler, samplerRatio }) {
  const root = {
    always_on: () => new sdk.AlwaysOnSampler(),
    always_off: () => new sdk.AlwaysOffSampler(),
    traceidratio: () => new sdk.TraceIdRatioBasedSampler(samplerRatio),
  };
  if (sampler.startsWith('parentbased_')) {
    return new sdk.ParentBasedSampler({
      root: root[/** @type {keyof typeof root} */ (sampler.slice('parentbased_'.length))](),
    });
  }
  return root[/** @type {keyof typeof root} */ (sampler)]();
}

/**
 * Starts the SDK when traces are asked for; resolves with its shutdown (flushing), or undefined.
 * @param {string} serviceName  unless OTEL_SERVICE_NAME @param {TracingConfig} config @returns {Promise<(() => Promise<void>) | undefined>}
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
    spanProcessors: [
      new sdk.BatchSpanProcessor({
        exporter: new OTLPTraceExporter({ url: config.tracesUrl }),
        ...config.batch,
      }),
    ],
    // No propagator: the producer and the handler write their trace headers themselves (traceparent.js).
    propagators: [],
    // Traces only: no metrics or logs exported.
    metricReaders: [],
    logRecordProcessors: [],
  });
  return () => node.shutdown();
}
