// OpenTelemetry's Node SDK, loaded by server.js only when the OTEL_ variables ask for traces and
// before any module of the service, so that the instrumentations' import hooks see http, express,
// pg and pino arrive. The SDK reads its own variables (OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER): spans leave through a batch processor,
// over OTLP/HTTP.
import { register } from 'node:module';
import * as otel from '@opentelemetry/api';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { ExpressInstrumentation } from '@opentelemetry/instrumentation-express';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { PinoInstrumentation } from '@opentelemetry/instrumentation-pino';
import { startNodeSdk } from '@opentelemetry/sdk-node';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace';
import { createAddHookMessageChannel } from 'import-in-the-middle';
import { operationOf, rowCountOf } from './pg-spans.js';
import { enableSpans } from './spans.js';

// Only the modules an instrumentation asks for are wrapped by the ESM hook, not every import.
const { registerOptions, waitForAllMessagesAcknowledged } = createAddHookMessageChannel();
register('import-in-the-middle/hook.mjs', import.meta.url, registerOptions);

// Traces only: the service's metrics are Prometheus's (/metrics) and its logs go to stdout.
process.env.OTEL_METRICS_EXPORTER ??= 'none';
process.env.OTEL_LOGS_EXPORTER ??= 'none';
process.env.OTEL_SERVICE_NAME ||= 'sluice-service';

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

const sdk = startNodeSdk({
  // The SDK's own messages on stderr (console.warn): stdout holds the service's JSON log only.
  logLevel: process.env.OTEL_LOG_LEVEL || 'warn',
  // The batch processor: a span costs the request a queue push, export happens off its path.
  // It runs after withoutUserData, so nothing it exports holds a statement's text.
  spanProcessors: [withoutUserData, batchProcessor()],
  instrumentations: [
    new HttpInstrumentation({
      // Probes and scrapes are not traced: they would outnumber the requests worth a trace.
      ignoreIncomingRequestHook: (req) => req.url === '/healthz' || req.url === '/readyz' || req.url === '/metrics',
    }),
    new ExpressInstrumentation({ ignoreLayersType: [/** @type {any} */ ('middleware'), /** @type {any} */ ('request_handler')] }),
    new PgInstrumentation({
      // Only pg calls made for a traced request; no span per pool checkout.
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
enableSpans(otel, () => sdk.shutdown());
