import { awaitsContinue } from './expect-continue.js';

// Refusals that come from the body's own arrival: the client is too slow, stopped, or lied about
// the length; reading on would only wait for more of the same.
const CLOSE_AT_ONCE = new Set(['body_timeout', 'bad_request']);

/**
 * What happens to a body that was not read when the answer goes out (a refusal before or while
 * reading it). Closing the connection at once would be cheapest, but a client still sending its
 * body then meets a reset, often before it has read the answer (EPIPE, ECONNRESET), and never sees
 * its 503 and Retry-After. So the rest of the body is read and dropped, up to the limits a body
 * has anyway (MAX_BODY_BYTES, BODY_READ_TIMEOUT_MS), and the connection stays usable. The
 * connection is closed after the answer instead when the body will not come (a client waiting for
 * `100 Continue`), when it is declared over the limit, or when the refusal is about its arrival.
 *
 * @param {import('node:http').IncomingMessage} req
 * @param {import('node:http').ServerResponse} res  not yet answered
 * @param {{ maxBodyBytes: number, bodyReadTimeoutMs: number, code?: string }} options  code: the refusal's
 */
export function finishUnreadBody(req, res, { maxBodyBytes, bodyReadTimeoutMs, code }) {
  if (req.complete) return;
  const declared = Number(req.headers['content-length'] ?? 0);
  if (awaitsContinue(res) || (code !== undefined && CLOSE_AT_ONCE.has(code)) || declared > maxBodyBytes) {
    res.setHeader('Connection', 'close');
    return;
  }
  let left = maxBodyBytes;
  const giveUp = () => {
    stop();
    req.socket.destroy();
  };
  const timer = setTimeout(giveUp, bodyReadTimeoutMs).unref();
  /** @param {Buffer} chunk */
  const onData = (chunk) => {
    left -= chunk.length;
    if (left < 0) giveUp();
  };
  const stop = () => {
    clearTimeout(timer);
    req.off('data', onData);
  };
  req.on('data', onData);
  req.once('end', stop);
  req.once('close', stop);
  req.resume();
}
