import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { formatTraceparent, parseTraceparent, parseXrayHeader } from '../../src/traceparent.js';
import { producerContextOf } from '../../src/tracing.js';

const hex = (/** @type {number} */ length) =>
  fc.string({ unit: fc.constantFrom(...'0123456789abcdef'), minLength: length, maxLength: length });

test('a traceparent written is read back as the same context', () => {
  fc.assert(
    fc.property(hex(32), hex(16), fc.integer({ min: 0, max: 1 }), (traceId, spanId, traceFlags) => {
      fc.pre(!/^0+$/.test(traceId) && !/^0+$/.test(spanId));
      assert.deepEqual(parseTraceparent(formatTraceparent({ traceId, spanId, traceFlags })), {
        traceId,
        spanId,
        traceFlags,
        isRemote: true,
      });
    }),
  );
});

/** A well-formed header's parts, any case and flags, ids not all zeros. */
const validParts = fc.record({
  traceId: hex(32).filter((id) => !/^0+$/.test(id)),
  spanId: hex(16).filter((id) => !/^0+$/.test(id)),
  flags: hex(2),
  upper: fc.boolean(),
  padding: fc.constantFrom('', ' ', '\t'),
});
/** @param {{ traceId: string, spanId: string, flags: string, upper: boolean, padding: string }} p */
const headerOf = ({ traceId, spanId, flags, upper, padding }) => {
  const header = `00-${traceId}-${spanId}-${flags}`;
  return `${padding}${upper ? header.toUpperCase() : header}${padding}`;
};

test('any version-00 traceparent with non-zero ids is read, whatever its case, flags and surrounding blanks', () => {
  fc.assert(
    fc.property(validParts, (p) => {
      assert.deepEqual(parseTraceparent(headerOf(p)), {
        traceId: p.traceId,
        spanId: p.spanId,
        traceFlags: Number.parseInt(p.flags, 16) & 1,
        isRemote: true,
      });
    }),
  );
});

test('anything but a version-00 traceparent with non-zero ids is no context', () => {
  for (const header of [
    undefined,
    '',
    'garbage',
    `00-${'0'.repeat(32)}-${'1'.repeat(16)}-01`,
    `00-${'1'.repeat(32)}-${'0'.repeat(16)}-01`,
    `01-${'1'.repeat(32)}-${'1'.repeat(16)}-01-extra`,
  ]) {
    assert.equal(parseTraceparent(header), undefined, String(header));
  }
  // A valid header broken in one way each: another version, an id of zeros, a digit too many or
  // too few, a character that is not hex, a missing or extra part, another separator.
  const broken = fc
    .tuple(
      validParts,
      fc.nat({ max: 5 }),
      fc.nat(),
      fc.constantFrom('g', 'z', '-', '_', ' ', '\u00e9'),
      hex(2).filter((v) => v !== '00'),
    )
    .map(([p, how, at, odd, version]) => {
      const parts = ['00', p.traceId, p.spanId, p.flags];
      if (how === 0) parts[0] = version;
      if (how === 1) parts[1 + (at % 2)] = '0'.repeat(parts[1 + (at % 2)].length);
      if (how === 2) parts[at % 4] += '0';
      if (how === 3) parts[at % 4] = parts[at % 4].slice(1);
      if (how === 4) parts[at % 4] = parts[at % 4].slice(0, -1) + odd;
      if (how === 5) return at % 2 ? parts.slice(0, 3).join('-') : `${parts.join('-')}-00`;
      return at % 5 === 0 ? parts.join('_') : parts.join('-');
    });
  fc.assert(
    fc.property(broken, (header) => {
      assert.equal(parseTraceparent(header), undefined, header);
    }),
  );
  fc.assert(
    fc.property(fc.string(), (s) => {
      assert.equal(parseTraceparent(s), undefined, 'a short random string is no traceparent');
    }),
  );
});

test("an X-Ray header's trace id is OpenTelemetry's without the version and dashes", () => {
  assert.deepEqual(
    parseXrayHeader('Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1'),
    {
      traceId: '5759e988bd862e3fe1be46a994272793',
      spanId: '53995c3f42cd8ad8',
      traceFlags: 1,
      isRemote: true,
    },
  );
  assert.equal(
    parseXrayHeader('Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1'),
    undefined,
    'no parent: nothing to link to',
  );
  assert.equal(parseXrayHeader(undefined), undefined);
});

test("a message's producer context: its traceparent attribute, else its AWSTraceHeader", () => {
  const traceparent = `00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`;
  const xray = 'Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1';
  assert.equal(
    producerContextOf({
      messageId: 'm',
      messageAttributes: { traceparent: { stringValue: traceparent } },
      attributes: { AWSTraceHeader: xray },
    })?.spanId,
    'b'.repeat(16),
  );
  assert.equal(
    producerContextOf({ messageId: 'm', attributes: { AWSTraceHeader: xray } })?.spanId,
    '53995c3f42cd8ad8',
  );
  assert.equal(producerContextOf({ messageId: 'm' }), undefined);
});
