import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import * as otel from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { OtelTracing } from '../../src/tracing/spans.js';
import { operationOf, operationOfQuery, rowCountOf, traceQueries } from '../../src/tracing/pg-spans.js';
import { insertQuery } from '../../src/users/chunk-writers.js';
import { createTransactionSettings } from '../../src/db/transaction-settings.js';

test("a statement's operation is its first keyword, after the transaction's SET LOCALs", () => {
  const settings = createTransactionSettings({ statementTimeoutMs: 30_000, lockTimeoutMs: 3000 });
  assert.equal(operationOf("INSERT INTO users VALUES ('a@b.co')"), 'INSERT');
  assert.equal(operationOf("SET LOCAL lock_timeout = 250; INSERT INTO users VALUES ('a@b.co')"), 'INSERT');
  assert.equal(operationOf(settings.statement("INSERT INTO users VALUES ('a@b.co')", { lockTimeoutMs: 250 })), 'INSERT', "a group's statement");
  assert.equal(operationOf(settings.statement("SELECT now(); INSERT INTO users VALUES ('a@b.co') RETURNING email")), 'INSERT', 'the now() before a write that returns its rows');
  assert.equal(operationOf(settings.statement('LOCK TABLE users IN ROW EXCLUSIVE MODE NOWAIT')), 'LOCK');
  assert.equal(operationOf(settings.begin({ statementTimeoutMs: 0 }, 'CREATE TEMPORARY TABLE t (x int) ON COMMIT DROP')), 'BEGIN');
  assert.equal(operationOf('copy users_staging FROM STDIN'), 'COPY');
  assert.equal(operationOf(''), undefined);
});

test("a writer's label names the statement; a query nobody labelled is named by its text", () => {
  const settings = createTransactionSettings({ statementTimeoutMs: 30_000, lockTimeoutMs: 3000 });
  assert.equal(operationOfQuery(insertQuery(settings.statement("SELECT now(); INSERT INTO users VALUES ('a@b.co')"))), 'INSERT', 'a write, whatever comes before it');
  assert.equal(operationOfQuery({ text: 'WITH sent AS (SELECT 1) INSERT INTO users SELECT * FROM sent', operation: 'INSERT' }), 'INSERT', 'the label, not the text');
  assert.equal(operationOfQuery({ text: 'COMMIT' }), 'COMMIT');
  assert.equal(operationOfQuery(settings.begin()), 'BEGIN');
  assert.equal(operationOfQuery(undefined), undefined);
});

test('nothing of a statement past its keyword reaches the operation, whatever the values hold', () => {
  fc.assert(fc.property(fc.string(), (value) => {
    const op = operationOf(`SET LOCAL lock_timeout = 250; INSERT INTO users VALUES (${JSON.stringify(value)})`);
    assert.equal(op, 'INSERT');
  }));
});

test('the row count is the last statement\'s when a query held several', () => {
  assert.equal(rowCountOf({ rowCount: 3 }), 3);
  assert.equal(rowCountOf([{ rowCount: null }, { rowCount: 7 }]), 7);
  assert.equal(rowCountOf(undefined), undefined);
});

test("a query is a span in a request the sampler kept; in one it left out, or outside any, it goes as it came", async () => {
  // This file's process only: the SDK with spans kept in memory, and the service's tracing over it.
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  otel.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  otel.trace.setGlobalTracerProvider(provider);
  const tracing = new OtelTracing(otel, provider);
  /** @type {unknown[][]} */
  const calls = [];
  const client = /** @type {import('pg').ClientBase} */ (/** @type {unknown} */ ({
    connectionParameters: { database: 'sluice', host: '127.0.0.1', port: 5432 },
    query: async (/** @type {unknown[]} */ ...args) => {
      calls.push(args);
      return { rowCount: 2 };
    },
  }));
  traceQueries(client, tracing);
  const statement = "INSERT INTO users VALUES ('a@b.co'), ('c@d.co')";
  const within = (/** @type {number} */ flags) =>
    otel.context.with(otel.trace.setSpanContext(otel.ROOT_CONTEXT, { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: flags, isRemote: true }), () => {
      const request = otel.trace.getTracer('test').startSpan('request');
      return otel.context.with(otel.trace.setSpan(otel.context.active(), request), async () => {
        const result = await client.query(statement);
        request.end();
        return result;
      });
    });
  assert.deepEqual(await within(1), { rowCount: 2 });
  assert.deepEqual(await within(0), { rowCount: 2 });
  assert.deepEqual(await client.query(statement), { rowCount: 2 });
  assert.deepEqual(calls, [[statement], [statement], [statement]], 'each query reached pg as it was made');
  await provider.forceFlush();
  const queries = exporter.getFinishedSpans().filter((s) => s.kind === otel.SpanKind.CLIENT);
  assert.equal(queries.length, 1, 'one span: the sampled request\'s query');
  assert.equal(queries[0].name, 'INSERT sluice');
  assert.equal(queries[0].attributes['db.response.returned_rows'], 2);
  assert.equal(queries[0].parentSpanContext?.traceId, '0af7651916cd43dd8448eb211c80319c');
  await provider.shutdown();
});
