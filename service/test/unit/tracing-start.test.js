import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadTracingConfig } from '@sluice/env';
import { NO_TRACING, startTracing } from '../../src/tracing/tracing.js';

test('tracing off is NO_TRACING, whose methods hand back what they are given and record nothing', async () => {
  assert.equal(await startTracing(loadTracingConfig({})), NO_TRACING);
  assert.equal(
    await startTracing(
      loadTracingConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
        OTEL_SDK_DISABLED: 'true',
      }),
    ),
    NO_TRACING,
  );
  const listener = () => {};
  const middleware = (/** @type {any} */ _req, /** @type {any} */ _res, /** @type {any} */ next) =>
    next();
  assert.equal(NO_TRACING.enabled, false);
  assert.equal(NO_TRACING.tracedRequests(listener), listener);
  assert.equal(NO_TRACING.tracedMiddleware('sluice.admission', middleware), middleware);
  assert.equal(NO_TRACING.startStep('sluice.validate'), undefined);
  assert.equal(NO_TRACING.activeSpan(), undefined);
  assert.equal(NO_TRACING.activeSpanSampled(), false);
  assert.equal(await NO_TRACING.inSpan('sluice.write', {}, async () => 7), 7);
  assert.deepEqual(NO_TRACING.traceFieldsOfLog(), {});
  assert.ok(Object.isFrozen(NO_TRACING));
});

test('on, the SDK samples as the configuration says: OTEL_TRACES_SAMPLER_ARG is the ratio used', async () => {
  /** @param {Record<string, string>} env */
  const sampledUnder = async (env) => {
    // Nothing is exported: nothing listens on port 9, and no span is kept long enough to be sent.
    const tracing = await startTracing(
      loadTracingConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
        OTEL_LOG_LEVEL: 'none',
        OTEL_BSP_SCHEDULE_DELAY: '600000',
        ...env,
      }),
    );
    assert.equal(tracing.enabled, true);
    let sampled;
    await tracing.inSpan('sluice.write', {}, async () => {
      sampled = tracing.activeSpanSampled();
    });
    return sampled;
  };
  assert.equal(
    await sampledUnder({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0' }),
    false,
  );
  assert.equal(
    await sampledUnder({ OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '1' }),
    true,
  );
});
