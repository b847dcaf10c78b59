// W3C Trace Context and X-Ray trace headers, read and written by hand: the feeder needs one header
// format each way, and no propagator has to be registered for it (on AWS the ADOT layer may
// register others).

/**
 * @typedef {object} RemoteContext  a span context from another process (OpenTelemetry's SpanContext)
 * @property {string} traceId  32 hex digits
 * @property {string} spanId   16 hex digits
 * @property {number} traceFlags  1: sampled
 * @property {boolean} isRemote
 */

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/**
 * A `traceparent` header's context, or undefined when it is not one (version 00).
 * @param {string | undefined} header @returns {RemoteContext | undefined}
 */
export function parseTraceparent(header) {
  const m = TRACEPARENT.exec(header?.trim().toLowerCase() ?? '');
  if (!m || m[1] === ZERO_TRACE || m[2] === ZERO_SPAN) return undefined;
  return { traceId: m[1], spanId: m[2], traceFlags: Number.parseInt(m[3], 16) & 1, isRemote: true };
}

/**
 * The context in an X-Ray trace header (the AWSTraceHeader system attribute of an SQS message):
 * `Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1`. X-Ray's trace id
 * is OpenTelemetry's with the dashes and version taken out.
 * @param {string | undefined} header @returns {RemoteContext | undefined}
 */
export function parseXrayHeader(header) {
  if (!header) return undefined;
  const fields = Object.fromEntries(header.split(';').map((f) => f.trim().split('=')));
  const root = /^1-([0-9a-f]{8})-([0-9a-f]{24})$/.exec(fields.Root ?? '');
  const parent = /^[0-9a-f]{16}$/.exec(fields.Parent ?? '');
  if (!root || !parent) return undefined;
  return { traceId: root[1] + root[2], spanId: parent[0], traceFlags: fields.Sampled === '1' ? 1 : 0, isRemote: true };
}

/**
 * The `traceparent` header for a span context.
 * @param {{ traceId: string, spanId: string, traceFlags: number }} context
 */
export const formatTraceparent = ({ traceId, spanId, traceFlags }) => `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, '0')}`;
