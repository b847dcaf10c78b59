import { defineVariables, loadEnv } from './load-env.js';
import { decimal, integer, oneOf, text, url } from './parsers.js';

// OpenTelemetry's own variables, declared so that --help and the doc list them, a bad one stops
// start-up, and every component turns tracing on by one rule.
export const TRACING_VARIABLES = defineVariables({
  OTEL_TRACES_EXPORTER: {
    parser: oneOf(['otlp', 'none']),
    defaultText: 'unset: off, unless OTEL_EXPORTER_OTLP_ENDPOINT is set',
    description:
      'otlp turns tracing on (OTLP over HTTP); none keeps it off ' +
      'whatever else is set. Off, no OpenTelemetry module is even loaded',
  },
  OTEL_EXPORTER_OTLP_ENDPOINT: {
    parser: url({ protocols: ['http', 'https'], trimSlashes: true }),
    defaultText: 'http://localhost:4318 when tracing is on',
    description:
      'the OTLP/HTTP receiver (a Collector, an agent); ' +
      'setting it turns tracing on. Spans go to its /v1/traces',
  },
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: {
    parser: url({ protocols: ['http', 'https'] }),
    defaultText: 'unset',
    description: 'the full traces URL instead (…/v1/traces); setting it turns tracing on',
  },
  OTEL_SERVICE_NAME: {
    parser: text(),
    defaultText: 'sluice-service, sluice-feeder or sluice-producer',
    description: "the spans' service.name",
  },
  OTEL_TRACES_SAMPLER: {
    parser: oneOf([
      'always_on',
      'always_off',
      'traceidratio',
      'parentbased_always_on',
      'parentbased_always_off',
      'parentbased_traceidratio',
    ]),
    defaultText: 'parentbased_always_on',
    description: "which traces are recorded; parentbased_* follows the caller's traceparent",
  },
  // Only the ratio samplers take an argument among the six above: it is a ratio, or refused.
  OTEL_TRACES_SAMPLER_ARG: {
    parser: decimal({ min: 0, max: 1 }),
    defaultText: '1',
    description: 'the ratio of the traceidratio samplers (traceidratio, parentbased_traceidratio)',
  },
  OTEL_EXPORTER_OTLP_PROTOCOL: {
    parser: oneOf(['http/protobuf', 'http/json']),
    defaultText: 'http/protobuf',
    description: "OTLP's encoding over HTTP (gRPC is not offered: one exporter fewer to load)",
  },
  OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: {
    parser: oneOf(['http/protobuf', 'http/json']),
    defaultText: 'OTEL_EXPORTER_OTLP_PROTOCOL',
    description: 'the same, for traces alone',
  },
  OTEL_BSP_SCHEDULE_DELAY: {
    parser: integer({ min: 0, max: 3_600_000, unit: 'milliseconds' }),
    defaultText: '5000',
    description: 'the batch span processor exports at least this often',
  },
  OTEL_BSP_MAX_QUEUE_SIZE: {
    parser: integer({ min: 1, max: 1_000_000 }),
    defaultText: '2048',
    description: 'spans held for export at most; past it, new spans are dropped (never a request)',
  },
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: {
    parser: integer({ min: 1, max: 1_000_000 }),
    defaultText: '512',
    description: 'spans per export request at most',
  },
  OTEL_BSP_EXPORT_TIMEOUT: {
    parser: integer({ min: 1, max: 3_600_000, unit: 'milliseconds' }),
    defaultText: '30000',
    description: "one export's limit",
  },
  OTEL_METRICS_EXPORTER: {
    parser: text(),
    defaultText: 'none',
    description: "left at none by sluice: its metrics are Prometheus's (/metrics) and EMF",
  },
  OTEL_LOGS_EXPORTER: {
    parser: text(),
    defaultText: 'none',
    description:
      'left at none by sluice: its logs are JSON lines on stdout, with trace_id and span_id',
  },
  OTEL_LOG_LEVEL: {
    parser: text(),
    defaultText: 'warn',
    description: "the SDK's own messages, on stderr: none, error, warn, info, debug, verbose, all",
  },
  OTEL_SDK_DISABLED: {
    parser: oneOf(['true', 'false']),
    defaultText: 'false',
    description: 'true: tracing off whatever else is set',
  },
});

/** @typedef {import('./load-env.js').Values<typeof TRACING_VARIABLES>} TracingValues */

/**
 * A component builds its SDK from this, never from process.env again; undefined: the SDK's default.
 * @typedef {object} TracingConfig
 * @property {boolean} enabled  OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint, unless
 *   OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true
 * @property {string} tracesUrl
 * @property {'http/protobuf' | 'http/json'} protocol
 * @property {string | undefined} serviceName
 * @property {NonNullable<TracingValues['OTEL_TRACES_SAMPLER']>} sampler
 * @property {number} samplerRatio  the ratio samplers' ratio, 0 to 1
 * @property {{ scheduledDelayMillis?: number, maxQueueSize?: number, maxExportBatchSize?: number,
 *   exportTimeoutMillis?: number }} batch OTEL_BSP_*
 * @property {string | undefined} logLevel  the SDK's own messages
 */

/** @param {TracingValues} v @returns {TracingConfig} */
export function tracingConfigFrom(v) {
  const off = v.OTEL_SDK_DISABLED === 'true' || v.OTEL_TRACES_EXPORTER === 'none';
  const asked =
    v.OTEL_TRACES_EXPORTER === 'otlp' ||
    v.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined ||
    v.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined;
  return {
    enabled: !off && asked,
    tracesUrl:
      v.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ??
      `${v.OTEL_EXPORTER_OTLP_ENDPOINT ?? 'http://localhost:4318'}/v1/traces`,
    protocol:
      v.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? v.OTEL_EXPORTER_OTLP_PROTOCOL ?? 'http/protobuf',
    serviceName: v.OTEL_SERVICE_NAME,
    sampler: v.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on',
    samplerRatio: v.OTEL_TRACES_SAMPLER_ARG ?? 1,
    batch: {
      scheduledDelayMillis: v.OTEL_BSP_SCHEDULE_DELAY,
      maxQueueSize: v.OTEL_BSP_MAX_QUEUE_SIZE,
      maxExportBatchSize: v.OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
      exportTimeoutMillis: v.OTEL_BSP_EXPORT_TIMEOUT,
    },
    logLevel: v.OTEL_LOG_LEVEL,
  };
}

/** A typo fails at start-up rather than inside the SDK. @param {NodeJS.ProcessEnv} [env] */
export const loadTracingConfig = (env = process.env) =>
  tracingConfigFrom(loadEnv(TRACING_VARIABLES, env));
