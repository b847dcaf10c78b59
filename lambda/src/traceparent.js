// W3C traceparent and X-Ray headers by hand: one format each way, and no propagator to register.

/**
 * @typedef {{ traceId: string, spanId: string, traceFlags: number,
 *   isRemote: boolean }} RemoteContext
 */

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);

/** Version 00 only. @param {string | undefined} header @returns {RemoteContext | undefined} */
export function parseTraceparent(header) {
  const m = TRACEPARENT.exec(header?.trim().toLowerCase() ?? '');
  if (!m || m[1] === ZERO_TRACE || m[2] === ZERO_SPAN) return undefined;
  return { traceId: m[1], spanId: m[2], traceFlags: Number.parseInt(m[3], 16) & 1, isRemote: true };
}

/**
 * SQS's AWSTraceHeader: its trace id is OpenTelemetry's without the version and dashes.
 * @param {string | undefined} header @returns {RemoteContext | undefined}
 */
export function parseXrayHeader(header) {
  if (!header) return undefined;
  const fields = Object.fromEntries(header.split(';').map((f) => f.trim().split('=')));
  const root = /^1-([0-9a-f]{8})-([0-9a-f]{24})$/.exec(fields.Root ?? '');
  const parent = /^[0-9a-f]{16}$/.exec(fields.Parent ?? '');
  if (!root || !parent) return undefined;
  return {
    traceId: root[1] + root[2],
    spanId: parent[0],
    traceFlags: fields.Sampled === '1' ? 1 : 0,
    isRemote: true,
  };
}

/** @param {{ traceId: string, spanId: string, traceFlags: number }} context */
export const formatTraceparent = ({ traceId, spanId, traceFlags }) =>
  `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, '0')}`;
