import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import * as otel from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { OtelTracing } from '../../src/tracing/spans.js';
import { createGroupCommit } from '../../src/users/group-commit.js';
import { createWritePolicy } from '../../src/users/write-policy.js';
import { part, userRow } from '../../../test/support/user-rows.js';

// This file's process only: the SDK with spans kept in memory, and the service's tracing over it.
const exporter = new InMemorySpanExporter();
const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
otel.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
otel.trace.setGlobalTracerProvider(provider);
const tracing = new OtelTracing(otel, provider);
const { inSpan } = tracing;
after(() => provider.shutdown());

/** @param {string} email @returns {import('../../src/users/user-schema.js').UserRow} */
const row = (email) => userRow({ email, name: 'N' });
const tick = () => new Promise((resolve) => setImmediate(resolve));
// The simple processor hands an ended span to the exporter a little later.
const settled = () => new Promise((resolve) => setTimeout(resolve, 20));

/** A group commit whose writes record the span active when they run, and finish when told. */
function recordingGroupCommit({ failGroup = false } = {}) {
  /** @type {{ kind: string, active: otel.Span | undefined }[]} */
  const calls = [];
  /** @type {(() => void)[]} */
  const pending = [];
  const hold = () => new Promise((resolve) => pending.push(() => resolve(undefined)));
  const gc = createGroupCommit({
    tracing,
    maxRows: 1000,
    maxInFlight: 1,
    policy: createWritePolicy({ diagnose: async () => 'own' }),
    /** @param {import('../../src/users/user-writer.js').WriteRequest} request */
    write: async ({ kind, rows, parts = [] }) => {
      if (kind !== 'group') {
        calls.push({ kind: 'alone', active: otel.trace.getActiveSpan() });
        return [{ inserted: rows.length, updated: 0 }];
      }
      calls.push({ kind: 'group', active: otel.trace.getActiveSpan() });
      await hold();
      if (failGroup) throw new Error('a row of the group is refused');
      return parts.map((p) => ({ inserted: p.rows.length, updated: 0 }));
    },
  });
  const finish = async () => {
    while (pending.length) {
      pending.shift()?.();
      await tick();
    }
  };
  return { gc, calls, finish };
}

test("a group's statement span is the oldest request's child and links to every request's write span, which records its group", async () => {
  exporter.reset();
  const { gc, calls, finish } = recordingGroupCommit();
  // The first request is written alone (a slot is free); the three behind it form one group.
  const writes = ['a', 'b', 'c', 'd'].map((e) =>
    inSpan('sluice.write', {}, () => gc.writeUsers(part([row(`${e}@x.co`)]), 'ignore')),
  );
  await tick();
  await finish();
  await finish();
  await Promise.all(writes);
  await settled();

  const spans = exporter.getFinishedSpans();
  const requests = spans.filter((s) => s.name === 'sluice.write');
  const groups = spans.filter((s) => s.name === 'sluice.group_commit.write');
  assert.equal(requests.length, 4);
  assert.deepEqual(
    groups.map((g) => g.attributes['sluice.group.requests']),
    [1, 3],
  );
  const second = groups[1];
  const carried = requests.filter((r) => r.attributes['sluice.group.requests'] === 3);
  assert.equal(carried.length, 3);
  assert.deepEqual(
    new Set(second.links.map((l) => l.context.spanId)),
    new Set(carried.map((r) => r.spanContext().spanId)),
  );
  assert.equal(
    second.parentSpanContext?.spanId,
    carried[0].spanContext().spanId,
    "a child of the oldest request's write",
  );
  for (const r of carried) assert.equal(typeof r.attributes['sluice.group.wait_ms'], 'number');
  // The statement ran with its group's span active (pg's span becomes its child).
  assert.deepEqual(
    calls.map((c) => c.active?.spanContext().spanId),
    groups.map((g) => g.spanContext().spanId),
  );
});

/** A request its caller sampled out (traceparent flags 00): the default sampler follows it. @param {() => Promise<unknown>} fn */
const unsampled = (fn) => {
  const parent = otel.trace.setSpanContext(otel.ROOT_CONTEXT, {
    traceId: '0af7651916cd43dd8448eb211c80319c',
    spanId: 'b7ad6b7169203331',
    traceFlags: 0,
    isRemote: true,
  });
  return otel.context.with(parent, fn);
};

test("a group's statement span hangs under and links to its sampled requests only; a group with none records nothing", async () => {
  exporter.reset();
  const { gc, calls, finish } = recordingGroupCommit();
  // 'a' is written alone; b, c, d form one group of which only c was sampled. Then e and f, both
  // sampled out.
  const write = (/** @type {string} */ e) => () =>
    inSpan('sluice.write', {}, () => gc.writeUsers(part([row(`${e}@x.co`)]), 'ignore'));
  const first = [write('a')(), unsampled(write('b')), write('c')(), unsampled(write('d'))];
  await tick();
  await finish();
  await finish();
  await Promise.all(first);
  const second = [unsampled(write('e')), unsampled(write('f'))];
  await tick();
  await finish();
  await Promise.all(second);
  await settled();

  const spans = exporter.getFinishedSpans();
  const requests = spans.filter((s) => s.name === 'sluice.write');
  assert.equal(requests.length, 2, 'a sampled-out request starts no write span');
  const groups = spans.filter((s) => s.name === 'sluice.group_commit.write');
  assert.deepEqual(
    groups.map((g) => g.attributes['sluice.group.requests']),
    [1, 3],
    'the group of e and f exports no span',
  );
  const [, group] = groups;
  const c = /** @type {typeof requests[number]} */ (
    requests.find((r) => r.attributes['sluice.group.requests'] === 3)
  );
  assert.equal(
    group.parentSpanContext?.spanId,
    c.spanContext().spanId,
    'under c, the oldest sampled request, not b',
  );
  assert.deepEqual(
    group.links.map((l) => l.context.spanId),
    [c.spanContext().spanId],
  );
  // Each statement ran under its group's span; e's and f's (a slot was free for e: two groups of
  // one) under one that records nothing.
  assert.equal(calls.length, 4);
  assert.deepEqual(
    calls.slice(0, 2).map((x) => x.active?.spanContext().spanId),
    groups.map((g) => g.spanContext().spanId),
  );
  for (const { active } of calls.slice(2)) {
    assert.equal(active?.isRecording(), false);
    assert.equal(
      otel.trace.isSpanContextValid(/** @type {otel.Span} */ (active).spanContext()),
      false,
    );
  }
});

test("a failed group's requests are written alone, each in its own span's context", async () => {
  exporter.reset();
  const { gc, calls, finish } = recordingGroupCommit({ failGroup: true });
  const writes = ['a', 'b'].map((e) =>
    inSpan('sluice.write', {}, () => gc.writeUsers(part([row(`${e}@x.co`)]), 'ignore')),
  );
  await tick();
  await finish();
  await finish();
  await Promise.allSettled(writes);
  await settled();
  const spans = exporter.getFinishedSpans();
  const requests = spans.filter((s) => s.name === 'sluice.write');
  const alone = calls.filter((c) => c.kind === 'alone').map((c) => c.active?.spanContext().spanId);
  assert.ok(alone.length >= 1);
  for (const id of alone)
    assert.ok(
      requests.some(
        (r) => r.spanContext().spanId === id && r.attributes['sluice.group.written_alone'] === true,
      ),
    );
  const failed = spans.filter(
    (s) => s.name === 'sluice.group_commit.write' && s.status.code === otel.SpanStatusCode.ERROR,
  );
  assert.ok(failed.length >= 1, "the failed group's span is marked failed");
});
