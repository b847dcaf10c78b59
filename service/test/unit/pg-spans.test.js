import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as otel from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { OtelTracing } from '../../src/tracing/spans.js';
import { Writable } from 'node:stream';
import { Lending } from '../../src/db/lending.js';
import { rowCountOf, statementTracer } from '../../src/tracing/pg-spans.js';
import { insertQuery } from '../../src/users/chunk-writers.js';
import { createTransactionSettings } from '../../src/db/transaction-settings.js';

test("the row count is the last statement's when a query held several", () => {
  assert.equal(rowCountOf({ rowCount: 3 }), 3);
  assert.equal(rowCountOf([{ rowCount: null }, { rowCount: 7 }]), 7);
  assert.equal(rowCountOf(undefined), undefined);
});

test('a statement is a span named by its label in a request the sampler kept; in one it left out, or outside any, it goes as it came', async () => {
  // This file's process only: the SDK with spans kept in memory, and the service's tracing over it.
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  otel.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  otel.trace.setGlobalTracerProvider(provider);
  const tracing = new OtelTracing(otel, provider);
  /** @type {unknown[][]} */
  const calls = [];
  const client = {
    query: async (/** @type {unknown} */ ...args) => {
      calls.push(args);
      return { rowCount: 2 };
    },
  };
  const lending = new Lending(client, {
    socket: { destroyed: false },
    trace: statementTracer({ database: 'sluice', host: '127.0.0.1', port: 5432 }, tracing),
  });
  const statement = insertQuery("INSERT INTO users VALUES ('a@b.co'), ('c@d.co')");
  const within = (/** @type {number} */ flags) =>
    otel.context.with(
      otel.trace.setSpanContext(otel.ROOT_CONTEXT, {
        traceId: '0af7651916cd43dd8448eb211c80319c',
        spanId: 'b7ad6b7169203331',
        traceFlags: flags,
        isRemote: true,
      }),
      () => {
        const request = otel.trace.getTracer('test').startSpan('request');
        return otel.context.with(otel.trace.setSpan(otel.context.active(), request), async () => {
          const result = await lending.query(statement);
          request.end();
          return result;
        });
      },
    );
  assert.deepEqual(await within(1), { rowCount: 2 });
  assert.deepEqual(await within(0), { rowCount: 2 });
  assert.deepEqual(await lending.query(statement), { rowCount: 2 });
  assert.deepEqual(
    calls,
    [[statement], [statement], [statement]],
    'each query reached pg as it was made',
  );
  await provider.forceFlush();
  const queries = exporter.getFinishedSpans().filter((s) => s.kind === otel.SpanKind.CLIENT);
  assert.equal(queries.length, 1, "one span: the sampled request's query");
  assert.equal(queries[0].name, 'INSERT sluice');
  assert.equal(queries[0].attributes['db.response.returned_rows'], 2);
  assert.equal(queries[0].parentSpanContext?.traceId, '0af7651916cd43dd8448eb211c80319c');
  const within1 = (/** @type {() => Promise<void>} */ fn) =>
    otel.context.with(
      otel.trace.setSpanContext(otel.ROOT_CONTEXT, {
        traceId: '0af7651916cd43dd8448eb211c80319c',
        spanId: 'b7ad6b7169203331',
        traceFlags: 1,
        isRemote: true,
      }),
      () => {
        const request = otel.trace.getTracer('test').startSpan('request');
        return otel.context.with(otel.trace.setSpan(otel.context.active(), request), async () => {
          await fn();
          request.end();
        });
      },
    );
  const client2 = {
    query: async (/** @type {unknown} */ q) => (q instanceof Writable ? q : { rowCount: 0 }),
  };
  const labelled = new Lending(client2, {
    socket: { destroyed: false },
    trace: statementTracer({ database: 'sluice' }, tracing),
  });
  const settings = createTransactionSettings({ statementTimeoutMs: 30_000 });
  await within1(async () => {
    await labelled.begin(settings.begin());
    await labelled.query(
      insertQuery(settings.statement("SELECT now(); INSERT INTO users VALUES ('a@b.co')")),
    );
    await labelled.query({ text: 'SELECT 1 -- INSERT', operation: 'LOCK' });
    await labelled.query('SAVEPOINT chunk');
    const copy = new Writable({ write: (_c, _e, cb) => cb() });
    await labelled.query(copy);
    copy.end();
    await new Promise((resolve) => copy.once('finish', resolve));
    await labelled.commit();
  });
  await provider.forceFlush();
  // A span is named by the label its statement carries, never by reading the text.
  const names = exporter
    .getFinishedSpans()
    .filter((s) => s.kind === otel.SpanKind.CLIENT)
    .map((s) => s.name)
    .slice(1);
  assert.deepEqual(names, [
    'BEGIN sluice',
    'INSERT sluice',
    'LOCK sluice',
    'query sluice',
    'COPY sluice',
    'COMMIT sluice',
  ]);
  await provider.shutdown();
});
