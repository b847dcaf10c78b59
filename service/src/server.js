#!/usr/bin/env node
// Entry point: the service (main.js). Tracing is opt-in (docs/tracing.md): main.js makes it from the
// configuration, with the other parts, and hands it to what records spans; off, not one
// OpenTelemetry module is imported.
import './main.js';
