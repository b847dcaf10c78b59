import { defineVariables, loadEnv } from './load-env.js';
import { oneOf, text, url } from './parsers.js';

/**
 * OpenTelemetry's own variables, as the service, the feeder and the producer read them: their
 * SDKs read these themselves (the spec's names and meanings); they are declared here so that
 * --help and docs/configuration.md list them, a bad value stops start-up, and every component
 * turns tracing on by the same rule (tracingRequested).
 */
export const TRACING_VARIABLES = defineVariables({
  OTEL_TRACES_EXPORTER: {
    parser: oneOf(/** @type {const} */ (['otlp', 'none'])),
    defaultText: 'unset: off, unless OTEL_EXPORTER_OTLP_ENDPOINT is set',
    description: 'otlp turns tracing on (OTLP over HTTP); none keeps it off whatever else is set. Off, no OpenTelemetry module is even loaded',
  },
  OTEL_EXPORTER_OTLP_ENDPOINT: {
    parser: url({ protocols: ['http', 'https'], trimSlashes: true }),
    defaultText: 'http://localhost:4318 when tracing is on',
    description: 'the OTLP/HTTP receiver (a Collector, an agent); setting it turns tracing on. Spans go to its /v1/traces',
  },
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: {
    parser: url({ protocols: ['http', 'https'] }),
    defaultText: 'unset',
    description: 'the full traces URL instead (…/v1/traces); setting it turns tracing on',
  },
  OTEL_SERVICE_NAME: { parser: text(), defaultText: 'sluice-service, sluice-feeder or sluice-producer', description: "the spans' service.name" },
  OTEL_TRACES_SAMPLER: {
    parser: oneOf(/** @type {const} */ (['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'])),
    defaultText: 'parentbased_always_on',
    description: 'which traces are recorded; parentbased_* follows the caller\'s traceparent',
  },
  OTEL_TRACES_SAMPLER_ARG: { parser: text(), defaultText: 'unset', description: 'the ratio of traceidratio samplers, 0 to 1' },
  OTEL_SDK_DISABLED: { parser: oneOf(/** @type {const} */ (['true', 'false'])), defaultText: 'false', description: 'true: tracing off whatever else is set' },
});

/**
 * Whether the environment asks for traces: OTEL_TRACES_EXPORTER=otlp, or an OTLP endpoint, unless
 * OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true. Checks every OTEL_ variable declared above
 * (a ConfigError names the bad ones), so a typo fails at start-up rather than inside the SDK.
 * @param {NodeJS.ProcessEnv} [env]
 */
export function tracingRequested(env = process.env) {
  const v = loadEnv(TRACING_VARIABLES, env);
  if (v.OTEL_SDK_DISABLED === 'true' || v.OTEL_TRACES_EXPORTER === 'none') return false;
  return v.OTEL_TRACES_EXPORTER === 'otlp' || v.OTEL_EXPORTER_OTLP_ENDPOINT !== undefined || v.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT !== undefined;
}
