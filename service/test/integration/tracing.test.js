import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createTestDatabase } from '../../../test/support/database.js';
import { startOtlpReceiver } from '../../../test/support/otlp-receiver.js';
import { startServerProcess } from '../../../test/support/server-process.js';
import { uniqueTag } from '../../../test/support/users.js';

const CLIENT = 3;
const SERVER = 2;

/** A W3C traceparent of a fresh sampled trace, and its ids. */
function newTraceparent() {
  const traceId = randomBytes(16).toString('hex');
  const spanId = randomBytes(8).toString('hex');
  return { traceId, spanId, header: `00-${traceId}-${spanId}-01` };
}

const TOKEN = `tracing-token-${Math.random().toString(36).slice(2)}`;

describe('tracing: the service exports its spans over OTLP/HTTP', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let testDb;
  /** @type {Awaited<ReturnType<typeof startOtlpReceiver>>} */ let receiver;
  /** @type {Awaited<ReturnType<typeof startServerProcess>>} */ let server;
  before(async () => {
    testDb = await createTestDatabase();
    receiver = await startOtlpReceiver();
    server = await startServerProcess({
      DATABASE_URL: testDb.url,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      // The receiver reads JSON (test/support/otlp-receiver.js); protobuf is the default.
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_BSP_SCHEDULE_DELAY: '100',
      // One write slot's worth of requests at once forms groups of several.
      GROUP_COMMIT: 'true',
      // A named client: its name goes on the request's span, never its token.
      INGEST_TOKENS: JSON.stringify({ 'tracing-client': TOKEN }),
    });
  });
  after(async () => {
    await server?.stop();
    await receiver?.close();
    await testDb?.drop();
  });

  /** @param {unknown[]} users @param {string} traceparent */
  const post = (users, traceparent) =>
    fetch(`${server.baseUrl}/users`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        traceparent,
        authorization: `Bearer ${TOKEN}`,
      },
      body: JSON.stringify(users),
    });

  test("one request: the caller's trace, a span per step, the pg statement without its text, no user data", async () => {
    const t = uniqueTag();
    const email = `${t}-traced@example.com`;
    const caller = newTraceparent();
    const res = await post([{ email, name: 'Traced Name' }], caller.header);
    assert.equal(res.status, 201);

    const spans = await receiver.waitFor((all) =>
      all.some(
        (s) => s.traceId === caller.traceId && s.kind === CLIENT && s.service === 'sluice-service',
      ),
    );
    const trace = spans.filter((s) => s.traceId === caller.traceId);
    const byName = (/** @type {string} */ name) => trace.find((s) => s.name === name);
    const http = trace.find((s) => s.kind === SERVER);
    assert.ok(http, 'an HTTP server span');
    assert.equal(http.parentSpanId, caller.spanId, 'the traceparent header is honoured');
    assert.equal(http.name, 'POST /users');
    assert.equal(http.attributes['http.route'], '/users');
    assert.equal(http.attributes['http.request.method'], 'POST');
    assert.equal(http.attributes['http.response.status_code'], 201);
    assert.equal(
      http.attributes['sluice.client'],
      'tracing-client',
      "the client's name, never its token",
    );
    assert.ok(
      !JSON.stringify(spans, (_key, value) =>
        typeof value === 'bigint' ? String(value) : value,
      ).includes(TOKEN),
      'no token in any span',
    );
    // The steps: children of the request's span, within it, one after the other (the write's
    // span is timed by the SDK's own clock, to the millisecond: its parent only).
    let previousEnd = http.start;
    for (const name of ['sluice.admission', 'sluice.read_body', 'sluice.validate']) {
      const step = byName(name);
      assert.ok(step, `a ${name} span`);
      assert.equal(step.parentSpanId, http.spanId, `${name} is a step of the request`);
      assert.equal(step.status, 0);
      assert.ok(
        step.start >= previousEnd && step.start <= step.end && step.end <= http.end,
        `${name} begins after the step before it ends, and ends within the request`,
      );
      previousEnd = step.end;
    }
    assert.equal(byName('sluice.write')?.parentSpanId, http.spanId);
    const write = /** @type {import('../../../test/support/otlp-receiver.js').ReceivedSpan} */ (
      byName('sluice.write')
    );
    assert.equal(write.attributes['sluice.group.requests'], 1);
    assert.equal(typeof write.attributes['sluice.group.wait_ms'], 'number');
    const group = byName('sluice.group_commit.write');
    assert.ok(group, 'the group statement span');
    assert.equal(group.parentSpanId, write.spanId);
    assert.deepEqual(
      group.links.map((l) => l.spanId),
      [write.spanId],
    );
    const statement = trace.find((s) => s.kind === CLIENT && s.parentSpanId === group.spanId);
    assert.ok(statement, "pg's span is the group span's child");
    assert.equal(statement.attributes['db.system.name'], 'postgresql');
    assert.equal(statement.attributes['db.operation.name'], 'INSERT');
    assert.match(statement.name, /^INSERT /);
    assert.equal(statement.attributes['db.response.returned_rows'], 1);
    assert.equal(
      statement.attributes['db.query.text'],
      undefined,
      "the statement's text is not exported",
    );

    for (const body of receiver.raw) {
      assert.ok(!body.includes(t), 'no user data (the email) in anything exported');
      assert.ok(!body.includes('Traced Name'));
    }
  });

  test('requests written in one group: the statement links to each, each records its group', async () => {
    const t = uniqueTag();
    const callers = Array.from({ length: 12 }, () => newTraceparent());
    const answers = await Promise.all(
      callers.map((c, i) => post([{ email: `${t}-${i}@example.com`, name: 'N' }], c.header)),
    );
    assert.ok(answers.every((r) => r.status === 201));
    const ids = new Set(callers.map((c) => c.traceId));
    await receiver.waitFor((all) =>
      callers.every((c) => all.some((s) => s.traceId === c.traceId && s.name === 'sluice.write')),
    );
    const writes = receiver.spans.filter((s) => ids.has(s.traceId) && s.name === 'sluice.write');
    // Every write is linked from the statement span that carried it, however the requests grouped.
    const groups = await receiver.waitFor((all) =>
      writes.every((w) =>
        all.some(
          (s) =>
            s.name === 'sluice.group_commit.write' && s.links.some((l) => l.spanId === w.spanId),
        ),
      ),
    );
    for (const w of writes) {
      const g = groups.find(
        (s) => s.name === 'sluice.group_commit.write' && s.links.some((l) => l.spanId === w.spanId),
      );
      assert.ok(g);
      assert.equal(w.attributes['sluice.group.requests'], g.attributes['sluice.group.requests']);
      assert.equal(g.links.length, g.attributes['sluice.group.requests']);
    }
    for (const body of receiver.raw) assert.ok(!body.includes(t), 'no emails in anything exported');
  });

  test("a stored email: the first statement's span fails with its SQLSTATE and never its message; the retry's succeeds", async () => {
    const t = uniqueTag();
    const email = `${t}-again@example.com`;
    assert.equal((await post([{ email, name: 'First' }], newTraceparent().header)).status, 201);
    const caller = newTraceparent();
    const res = await post(
      [
        { email, name: 'Second' },
        { email: `${t}-new@example.com`, name: 'New' },
      ],
      caller.header,
    );
    assert.equal(res.status, 201);
    const spans = await receiver.waitFor(
      (all) => all.filter((s) => s.traceId === caller.traceId && s.kind === CLIENT).length >= 2,
    );
    const statements = spans.filter((s) => s.traceId === caller.traceId && s.kind === CLIENT);
    const failed = statements.filter((s) => s.status === 2);
    assert.equal(failed.length, 1, 'the all-new attempt failed on the stored email');
    assert.equal(failed[0].attributes['error.type'], '23505');
    assert.equal(failed[0].attributes['db.operation.name'], 'INSERT');
    assert.ok(
      statements.some((s) => s.status === 0 && s.attributes['db.response.returned_rows'] === 1),
      'the retry wrote the new one',
    );
    for (const body of receiver.raw) {
      assert.ok(!body.includes(t), 'no email in anything exported');
      assert.ok(!body.includes('duplicate key'), "no database error's message");
    }
  });

  test('a streamed body: its COPY is a span with its rows', async () => {
    const t = uniqueTag();
    const caller = newTraceparent();
    const body = Array.from({ length: 3 }, (_, i) =>
      JSON.stringify({ email: `${t}-${i}@example.com`, name: 'Streamed' }),
    ).join('\n');
    const res = await fetch(`${server.baseUrl}/users`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-ndjson',
        traceparent: caller.header,
        authorization: `Bearer ${TOKEN}`,
      },
      body,
    });
    assert.equal(res.status, 201);
    const spans = await receiver.waitFor((all) =>
      all.some((s) => s.traceId === caller.traceId && s.kind === SERVER),
    );
    const copy = spans.find(
      (s) =>
        s.traceId === caller.traceId &&
        s.kind === CLIENT &&
        s.attributes['db.operation.name'] === 'COPY',
    );
    assert.ok(
      copy,
      `a COPY span; got ${spans
        .filter((s) => s.traceId === caller.traceId)
        .map((s) => s.name)
        .join(', ')}`,
    );
    assert.equal(copy.status, 0);
    assert.equal(copy.attributes['db.response.returned_rows'], 3);
    for (const b of receiver.raw) assert.ok(!b.includes(t), 'no email in anything exported');
  });

  test("a caller's trace it did not sample: nothing exported, the request answered as ever", async () => {
    const t = uniqueTag();
    const unsampled = newTraceparent();
    const res = await post(
      [{ email: `${t}-unsampled@example.com`, name: 'N' }],
      unsampled.header.replace(/-01$/, '-00'),
    );
    assert.equal(res.status, 201);
    // A sampled request after it: once its spans are in, the unsampled one's would be too.
    const sampled = newTraceparent();
    assert.equal(
      (await post([{ email: `${t}-sampled@example.com`, name: 'N' }], sampled.header)).status,
      201,
    );
    const spans = await receiver.waitFor((all) =>
      all.some((s) => s.traceId === sampled.traceId && s.kind === SERVER),
    );
    assert.deepEqual(
      spans.filter((s) => s.traceId === unsampled.traceId),
      [],
    );
  });

  test('log lines written inside a span carry its trace_id and span_id', async () => {
    const caller = newTraceparent();
    const from = server.logs.length;
    // A refused request is logged by the error handler while its span is active.
    const res = await post([{ email: 'not an email' }], caller.header);
    assert.equal(res.status, 400);
    const line = await server.waitForLog((l) => l.trace_id === caller.traceId, { from });
    assert.match(line.span_id, /^[0-9a-f]{16}$/);
    // The step that refused it is marked failed, with the error's code and never its message.
    const spans = await receiver.waitFor((all) =>
      all.some((s) => s.traceId === caller.traceId && s.kind === SERVER),
    );
    const validate = spans.find(
      (s) => s.traceId === caller.traceId && s.name === 'sluice.validate',
    );
    assert.ok(validate);
    assert.equal(validate.status, 2);
    assert.equal(validate.attributes['error.type'], 'invalid_batch');
    assert.ok(
      spans.filter((s) => s.traceId === caller.traceId).every((s) => s.name !== 'sluice.write'),
      'nothing was written',
    );
  });
});

describe('tracing off', () => {
  const REPORT_IMPORTS = fileURLToPath(
    new URL('../../../test/support/report-imports.js', import.meta.url),
  );

  test('the service imports no OpenTelemetry module, and answers as ever', async () => {
    const testDb = await createTestDatabase();
    const server = await startServerProcess({
      DATABASE_URL: testDb.url,
      NODE_OPTIONS: `--import=${REPORT_IMPORTS}`,
    });
    try {
      const res = await fetch(`${server.baseUrl}/users`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify([{ email: `${uniqueTag()}-off@example.com`, name: 'N' }]),
      });
      assert.equal(res.status, 201);
      assert.deepEqual(
        server.logs.filter((l) => l.msg === 'imported'),
        [],
      );
      assert.ok(server.logs.every((l) => l.trace_id === undefined));
    } finally {
      await server.stop();
      await testDb.drop();
    }
  });

  test('the reporter does see the SDK when tracing is on (the test above can fail)', async () => {
    const receiver = await startOtlpReceiver();
    const server = await startServerProcess({
      DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
      NODE_OPTIONS: `--import=${REPORT_IMPORTS}`,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    });
    try {
      assert.ok(
        server.logs.some(
          (l) => l.msg === 'imported' && /@opentelemetry\/sdk-trace/.test(l.specifier),
        ),
      );
    } finally {
      await server.stop();
      await receiver.close();
    }
  });
});

test('on SIGTERM the spans still held by the batch processor are exported before the service exits', async () => {
  const testDb = await createTestDatabase();
  const receiver = await startOtlpReceiver();
  // A schedule far beyond the test: only the flush at shutdown can export them.
  const server = await startServerProcess({
    DATABASE_URL: testDb.url,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '600000',
  });
  try {
    const caller = newTraceparent();
    const res = await fetch(`${server.baseUrl}/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', traceparent: caller.header },
      body: JSON.stringify([{ email: `${uniqueTag()}-flush@example.com`, name: 'N' }]),
    });
    assert.equal(res.status, 201);
    assert.equal(receiver.spans.length, 0);
    server.child.kill('SIGTERM');
    assert.deepEqual(await server.exited, { code: 0, signal: null });
    assert.ok(
      receiver.spans.some((s) => s.traceId === caller.traceId && s.name === 'sluice.write'),
    );
  } finally {
    await server.stop();
    await receiver.close();
    await testDb.drop();
  }
});
