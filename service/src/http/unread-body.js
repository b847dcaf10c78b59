import { awaitsContinue } from './expect-continue.js';

// Refusals that come from the body's own arrival: the client is too slow, stopped, or lied about
// the length; reading on would only wait for more of the same.
const CLOSE_AT_ONCE = new Set(['body_timeout', 'bad_request']);

/**
 * A body not read when the answer goes out is read and dropped within a body's limits, so a client
 * still sending reads its answer rather than a reset; the connection is closed instead when the
 * body will not come (100 Continue), is declared over the limit, or its arrival is the refusal.
 * @param {import('node:http').IncomingMessage} req @param {import('node:http').ServerResponse} res  not yet answered
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
