import http from 'node:http';
import { ApiError } from '../errors.js';
import { describeError } from './error-handler.js';
import { holdContinue } from './expect-continue.js';

// What Node's HTTP parser refuses before a request reaches Express, by Node's error code.
/** @type {Record<string, import('../errors.js').ApiErrorCode>} */
const PARSER_REFUSALS = {
  HPE_HEADER_OVERFLOW: 'headers_too_large',
  ERR_HTTP_REQUEST_TIMEOUT: 'request_timeout',
};

/**
 * `100 Continue` held until the request is admitted.
 * @param {import('node:http').RequestListener} app
 * @param {{ headersTimeoutMs?: number, checkEveryMs?: number }} [timeouts] 408 after
 */
export function createHttpServer(app, { headersTimeoutMs = 66_000, checkEveryMs = 30_000 } = {}) {
  const server = http.createServer(
    { headersTimeout: headersTimeoutMs, connectionsCheckingInterval: checkEveryMs },
    app,
  );
  // Longer than a load balancer's idle timeout, so the balancer closes first, never us mid-reuse.
  server.keepAliveTimeout = 65_000;

  server.on('checkContinue', (req, res) => {
    holdContinue(res);
    server.emit('request', req, res);
  });
  server.on('checkExpectation', (_req, res) => {
    const { status, headers, body } = describeError(new ApiError('expectation_failed'));
    const text = JSON.stringify(body);
    res.writeHead(status, { ...headers, ...jsonHeaders(text) }).end(text);
  });
  server.on('clientError', (err, socket) => {
    // As Node's own handler: answer only on a socket that can still take one, never mid-response.
    const inResponse = /** @type {{ _httpMessage?: { headersSent?: boolean } }} */ (socket)
      ._httpMessage?.headersSent;
    if (!socket.writable || inResponse || /** @type {any} */ (err).code === 'ECONNRESET')
      return socket.destroy();
    const code = PARSER_REFUSALS[/** @type {any} */ (err).code] ?? 'bad_request';
    socket.end(rawResponse(describeError(new ApiError(code))));
  });
  return server;
}

/** @param {string} text */
const jsonHeaders = (text) => ({
  'Content-Type': 'application/json; charset=utf-8',
  'Content-Length': String(Buffer.byteLength(text)),
  Connection: 'close',
});

/** @param {{ status: number, headers: Record<string, string>, body: object }} answer */
function rawResponse({ status, headers, body }) {
  const text = JSON.stringify(body);
  const lines = Object.entries({ ...headers, ...jsonHeaders(text) });
  return (
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\n` +
    `${lines.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n${text}`
  );
}
