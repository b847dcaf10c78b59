import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { formatTraceparent, parseTraceparent, parseXrayHeader } from '../../src/traceparent.js';
import { producerContextOf } from '../../src/tracing.js';

const hex = (/** @type {number} */ length) => fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: length, maxLength: length });

test('a traceparent written is read back as the same context', () => {
  fc.assert(fc.property(hex(32), hex(16), fc.integer({ min: 0, max: 1 }), (traceId, spanId, traceFlags) => {
    fc.pre(!/^0+$/.test(traceId) && !/^0+$/.test(spanId));
    assert.deepEqual(parseTraceparent(formatTraceparent({ traceId, spanId, traceFlags })), { traceId, spanId, traceFlags, isRemote: true });
  }));
});

test('anything but a version-00 traceparent with non-zero ids is no context', () => {
  for (const header of [undefined, '', 'garbage', `00-${'0'.repeat(32)}-${'1'.repeat(16)}-01`, `00-${'1'.repeat(32)}-${'0'.repeat(16)}-01`, `01-${'1'.repeat(32)}-${'1'.repeat(16)}-01-extra`]) {
    assert.equal(parseTraceparent(header), undefined, String(header));
  }
  fc.assert(fc.property(fc.string(), (s) => {
    const parsed = parseTraceparent(s);
    if (parsed) assert.match(s.trim().toLowerCase(), /^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/);
  }));
});

test("an X-Ray header's trace id is OpenTelemetry's without the version and dashes", () => {
  assert.deepEqual(parseXrayHeader('Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1'), {
    traceId: '5759e988bd862e3fe1be46a994272793', spanId: '53995c3f42cd8ad8', traceFlags: 1, isRemote: true,
  });
  assert.equal(parseXrayHeader('Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1'), undefined, 'no parent: nothing to link to');
  assert.equal(parseXrayHeader(undefined), undefined);
});

test("a message's producer context: its traceparent attribute, else its AWSTraceHeader", () => {
  const traceparent = `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`;
  const xray = 'Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1';
  assert.equal(producerContextOf({ messageId: 'm', messageAttributes: { traceparent: { stringValue: traceparent } }, attributes: { AWSTraceHeader: xray } })?.spanId, 'b'.repeat(16));
  assert.equal(producerContextOf({ messageId: 'm', attributes: { AWSTraceHeader: xray } })?.spanId, '53995c3f42cd8ad8');
  assert.equal(producerContextOf({ messageId: 'm' }), undefined);
});
