import { once } from 'node:events';
import net from 'node:net';

/**
 * @typedef {{ status: number, headers: Record<string, string>, body: any, text: string, raw: string }} RawResponse
 */

/**
 * One exchange over a bare socket, for what fetch will not send: lying or doubled headers, a body
 * that stalls or trickles. `send` writes what it likes; the answer is read until the server closes
 * the connection (send `Connection: close` when the server would otherwise keep it open).
 *
 * @param {string} baseUrl
 * @param {(socket: net.Socket) => Promise<void> | void} send
 * @param {{ closeWithinMs?: number }} [options]  a guard: fail rather than hang
 * @returns {Promise<RawResponse>}
 */
export async function rawExchange(baseUrl, send, { closeWithinMs = 15_000 } = {}) {
  const { hostname, port } = new URL(baseUrl);
  const socket = net.connect(Number(port), hostname);
  socket.on('error', () => {}); // a reset after the answer is no failure of the test's
  await once(socket, 'connect');
  /** @type {Buffer[]} */
  const received = [];
  socket.on('data', (chunk) => received.push(chunk));
  // Not events.once: it rejects on 'error', and a server that answers and closes while the client
  // still writes resets the connection (ECONNRESET on a busy machine) after the answer arrived.
  // Whether the answer is the right one is for the caller to check.
  const closed = new Promise((resolve) => socket.once('close', resolve));
  await send(socket);
  let guard;
  const timedOut = new Promise((_, reject) => {
    guard = setTimeout(
      () => reject(new Error(`the server did not close the connection within ${closeWithinMs} ms`)),
      closeWithinMs,
    );
  });
  try {
    await Promise.race([closed, timedOut]);
  } finally {
    clearTimeout(guard);
    socket.destroy();
  }
  return parseFirstResponse(Buffer.concat(received).toString('latin1'));
}

/**
 * The first HTTP/1.1 response in `raw` (bodies framed by Content-Length, as the service sends them).
 * @param {string} raw
 * @returns {RawResponse}
 */
export function parseFirstResponse(raw) {
  const headEnd = raw.indexOf('\r\n\r\n');
  if (headEnd === -1) throw new Error(`no HTTP response in ${JSON.stringify(raw.slice(0, 200))}`);
  const [statusLine, ...lines] = raw.slice(0, headEnd).split('\r\n');
  /** @type {Record<string, string>} */
  const headers = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const length = Number(headers['content-length'] ?? 0);
  const text = Buffer.from(raw.slice(headEnd + 4, headEnd + 4 + length), 'latin1').toString('utf8');
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body, text, raw };
}

/**
 * The head of a POST /users, ready to write: each [name, value] pair becomes one header line, in
 * order, so a header can be given twice.
 * @param {[string, string | number][]} headers
 */
export function postHead(headers) {
  return `POST /users HTTP/1.1\r\nHost: 127.0.0.1\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
}
