// A small OTLP/HTTP receiver for the tests, on 127.0.0.1: what a Collector's OTLP receiver takes
// over HTTP with JSON encoding (the encoding @opentelemetry/exporter-trace-otlp-http sends), kept
// in memory and flattened for assertions. docs/tracing.md says why not the Collector itself.
import { once } from 'node:events';
import http from 'node:http';
import { gunzipSync } from 'node:zlib';

/**
 * @typedef {object} ReceivedSpan
 * @property {string} service  the resource's service.name
 * @property {string} traceId  hex
 * @property {string} spanId
 * @property {string | undefined} parentSpanId
 * @property {string} name
 * @property {number} kind  OTLP's: 1 internal, 2 server, 3 client, 4 producer, 5 consumer
 * @property {Record<string, unknown>} attributes
 * @property {{ traceId: string, spanId: string, attributes: Record<string, unknown> }[]} links
 * @property {{ name: string, attributes: Record<string, unknown> }[]} events
 * @property {number} status  0 unset, 1 ok, 2 error
 * @property {bigint} start  nanoseconds since the epoch
 * @property {bigint} end
 */

/** @param {any} v  an OTLP AnyValue @returns {unknown} */
function anyValue(v) {
  if (v == null) return undefined;
  if ('stringValue' in v) return v.stringValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return v.doubleValue;
  if ('boolValue' in v) return v.boolValue;
  if ('arrayValue' in v) return (v.arrayValue.values ?? []).map(anyValue);
  if ('kvlistValue' in v) return attributes(v.kvlistValue.values);
  if ('bytesValue' in v) return v.bytesValue;
  return undefined;
}

/** @param {any[] | undefined} list @returns {Record<string, unknown>} */
const attributes = (list) =>
  Object.fromEntries((list ?? []).map((a) => [a.key, anyValue(a.value)]));

/**
 * The spans of one ExportTraceServiceRequest (OTLP JSON), flattened.
 * @param {any} request @returns {ReceivedSpan[]}
 */
export function flattenSpans(request) {
  /** @type {ReceivedSpan[]} */
  const spans = [];
  for (const rs of request.resourceSpans ?? []) {
    const service = String(attributes(rs.resource?.attributes)['service.name'] ?? '');
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        spans.push({
          service,
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId || undefined,
          name: s.name,
          kind: s.kind,
          attributes: attributes(s.attributes),
          links: (s.links ?? []).map((/** @type {any} */ l) => ({
            traceId: l.traceId,
            spanId: l.spanId,
            attributes: attributes(l.attributes),
          })),
          events: (s.events ?? []).map((/** @type {any} */ e) => ({
            name: e.name,
            attributes: attributes(e.attributes),
          })),
          status: s.status?.code ?? 0,
          start: BigInt(s.startTimeUnixNano ?? 0),
          end: BigInt(s.endTimeUnixNano ?? 0),
        });
      }
    }
  }
  return spans;
}

/**
 * Starts the receiver on 127.0.0.1 and a free port. POST /v1/traces with JSON is kept; metrics and
 * logs are accepted and dropped; protobuf is refused with 415 (the exporters here send JSON).
 * With `discard` (the bench's tracing variant), any body is read, counted and dropped.
 * @param {{ discard?: boolean }} [options]
 * @returns {Promise<{ endpoint: string, spans: ReceivedSpan[], raw: string[], received: { requests: number, bytes: number }, waitFor: (test: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number) => Promise<ReceivedSpan[]>, close: () => Promise<void> }>}
 *   endpoint: for OTEL_EXPORTER_OTLP_ENDPOINT; raw: every body as received, to search for user data
 */
export async function startOtlpReceiver({ discard = false } = {}) {
  /** @type {ReceivedSpan[]} */
  const spans = [];
  /** @type {string[]} */
  const raw = [];
  const received = { requests: 0, bytes: 0 };
  const server = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    let body = Buffer.concat(chunks);
    if (req.headers['content-encoding'] === 'gzip' && !discard) body = gunzipSync(body);
    if (
      req.method !== 'POST' ||
      !['/v1/traces', '/v1/metrics', '/v1/logs'].includes(req.url ?? '')
    ) {
      res.writeHead(404).end();
      return;
    }
    if (discard) {
      received.requests++;
      received.bytes += body.length;
      res
        .writeHead(200, {
          'content-type': String(req.headers['content-type'] ?? 'application/json'),
        })
        .end();
      return;
    }
    if (!String(req.headers['content-type']).startsWith('application/json')) {
      res.writeHead(415).end();
      return;
    }
    if (req.url === '/v1/traces') {
      const text = body.toString('utf8');
      raw.push(text);
      spans.push(...flattenSpans(JSON.parse(text)));
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    raw,
    received,
    async waitFor(test, timeoutMs = 15_000) {
      const end = Date.now() + timeoutMs;
      while (!test(spans)) {
        if (Date.now() > end)
          throw new Error(
            `the spans awaited did not arrive in ${timeoutMs} ms; received: ${spans.map((s) => `${s.service}:${s.name}`).join(', ')}`,
          );
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return spans;
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
