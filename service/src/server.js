#!/usr/bin/env node
// Entry point. Tracing is opt-in (docs/tracing.md): only when the OTEL_ variables ask for it is the
// OpenTelemetry SDK loaded, and it must be before the service's own modules, so that its hooks see
// http, express, pg and pino being imported. Off, not one OpenTelemetry module is imported.
import { ConfigError, tracingRequested } from '@sluice/env';

let tracing = false;
try {
  tracing = tracingRequested();
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  console.error(`sluice: bad configuration: ${err.message}`);
  process.exit(1);
}
if (tracing) await import('./tracing/sdk.js');
await import('./main.js');
