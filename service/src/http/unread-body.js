import { awaitsContinue } from './expect-continue.js';

// The body's own arrival is the refusal: reading on would only wait for more of the same.
const CLOSE_AT_ONCE = new Set(['body_timeout', 'bad_request']);
// A large (or undeclared) body over the rate is held unread a while, then read and dropped: a
// client that never backs off is slowed by its own connection, not costing a read of each body.
const HOLD_FIRST = new Set(['rate_limited']);
export const HOLD_ABOVE_BYTES = 64 * 1024;
export const REFUSED_BODY_HOLD_MS = 1000;
/** Each holds a socket's receive buffer in the kernel. */
export const MAX_HELD_BODIES = 256;
let heldBodies = 0;

export const heldBodyCount = () => heldBodies;

/**
 * A body left unread is read and dropped within its limits, so a client still sending reads its
 * answer, not a reset; closed when the body will not come, is over the limit, or is the refusal.
 * @param {import('node:http').IncomingMessage} req @param {import('node:http').ServerResponse} res
 * @param {{ maxBodyBytes: number, bodyReadTimeoutMs: number, code?: string }} options
 */
export function finishUnreadBody(req, res, { maxBodyBytes, bodyReadTimeoutMs, code }) {
  if (req.complete) return;
  const length = req.headers['content-length'];
  const declared = Number(length ?? 0);
  if (
    awaitsContinue(res) ||
    (code !== undefined && CLOSE_AT_ONCE.has(code)) ||
    declared > maxBodyBytes
  ) {
    res.setHeader('Connection', 'close');
    return;
  }
  if (
    code !== undefined &&
    HOLD_FIRST.has(code) &&
    (length === undefined || declared > HOLD_ABOVE_BYTES) &&
    heldBodies < MAX_HELD_BODIES
  ) {
    // Read started and paused: the body counts as consumed (Node would otherwise read and drop it
    // itself once the answer is out) and stays in the kernel, which slows its sender.
    req.pause();
    req.read(0);
    heldBodies++;
    const release = () => {
      clearTimeout(hold);
      req.off('close', release);
      heldBodies--;
    };
    const hold = setTimeout(() => {
      release();
      dropBody(req, maxBodyBytes, bodyReadTimeoutMs);
    }, REFUSED_BODY_HOLD_MS).unref();
    req.once('close', release);
    return;
  }
  dropBody(req, maxBodyBytes, bodyReadTimeoutMs);
}

/**
 * @param {import('node:http').IncomingMessage} req @param {number} maxBodyBytes
 * @param {number} timeoutMs
 */
function dropBody(req, maxBodyBytes, timeoutMs) {
  if (req.complete) return;
  let left = maxBodyBytes;
  const giveUp = () => {
    stop();
    req.socket.destroy();
  };
  const timer = setTimeout(giveUp, timeoutMs).unref();
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
