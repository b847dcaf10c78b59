// The OpenTelemetry SDK for the feeder's local runner and the producer, started only when the
// OTEL_ variables ask (@sluice/env/tracing): what the ADOT Lambda layer is on AWS. Spans leave
// through a batch processor over OTLP/HTTP (protobuf, or JSON when OTEL_EXPORTER_OTLP_PROTOCOL is
// http/json); the SDK reads OTEL_SERVICE_NAME and the sampler variables itself.
import { tracingRequested } from '@sluice/env';

/**
 * Starts the SDK when tracing is asked for; resolves with its shutdown (which flushes the spans
 * still held), or undefined when off.
 * @param {string} serviceName  the default service.name (OTEL_SERVICE_NAME wins)
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {Promise<(() => Promise<void>) | undefined>}
 */
export async function startLocalTracing(serviceName, env = process.env) {
  if (!tracingRequested(env)) return undefined;
  const [{ startNodeSdk }, { BatchSpanProcessor }, json, protobuf] = await Promise.all([
    import('@opentelemetry/sdk-node'),
    import('@opentelemetry/sdk-trace'),
    import('@opentelemetry/exporter-trace-otlp-http'),
    import('@opentelemetry/exporter-trace-otlp-proto'),
  ]);
  // Traces only: no metrics or logs exported.
  env.OTEL_METRICS_EXPORTER ??= 'none';
  env.OTEL_LOGS_EXPORTER ??= 'none';
  env.OTEL_SERVICE_NAME ||= serviceName;
  const protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL;
  const exporter = protocol === 'http/json' ? new json.OTLPTraceExporter() : new protobuf.OTLPTraceExporter();
  const delay = Number(env.OTEL_BSP_SCHEDULE_DELAY || Number.NaN);
  const sdk = startNodeSdk({
    logLevel: env.OTEL_LOG_LEVEL || 'warn',
    spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: Number.isFinite(delay) ? delay : undefined })],
  });
  return () => sdk.shutdown();
}
