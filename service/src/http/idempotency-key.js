import { createHash } from 'node:crypto';
import { ApiError } from '../errors.js';
import { storedOutcomeOf } from '../users/idempotency-keys.js';
import { renderAnswer, sendAnswer } from './answer.js';
import { ANONYMOUS_CLIENT, ONE_CLIENT } from './fair-share.js';

// The Idempotency-Key header (IETF httpapi draft): read before the body, as a Structured Field
// string (RFC 8941), scoped by the request's client (its credential's kind and name: the scope
// authenticate.js gives it); the request's fingerprint (its content type, Prefer, query and
// decoded body) taken as the body is read. The write unit claims the key and stores the outcome
// with its rendering (users/write-unit.js); a key taken is answered here: the answer rendered
// again from them with `Idempotent-Replayed: true`, or the catalogue's 422 or 409.

const MAX_KEY_LENGTH = 255;

/**
 * A request's key: its scope and name, and the fingerprint taken of it so far (`hash`: what
 * changes the answer besides the body, then the body's bytes or text, in order; `fingerprint()`
 * once it is read).
 * @typedef {{ client: string, key: string, hash: import('node:crypto').Hash,
 *   fingerprint: () => Buffer }} RequestKey
 */

/**
 * The key of an `Idempotency-Key` value: a Structured Field string (`"..."`, visible ASCII, `\"`
 * and `\\` escaped) of 1 to 255 characters, parameters after it ignored (RFC 8941, 3.1.2); else
 * 400 malformed_idempotency_key. A header sent twice arrives joined by a comma, and is refused.
 * @param {string} value @returns {string}
 */
export function parseIdempotencyKey(value) {
  const text = value.trim();
  if (text[0] !== '"') throw malformed();
  let key = '';
  let i = 1;
  for (; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) break;
    if (c === 0x5c) {
      const next = text[++i];
      if (next !== '"' && next !== '\\') throw malformed();
      key += next;
      continue;
    }
    if (c < 0x20 || c > 0x7e) throw malformed();
    key += text[i];
  }
  if (i >= text.length) throw malformed();
  if (key.length === 0 || key.length > MAX_KEY_LENGTH) throw malformed();
  const rest = text.slice(i + 1);
  if (rest !== '' && !PARAMETERS.test(rest)) throw malformed();
  return key;
}

// RFC 8941 parameters: `;key` or `;key=value`, value a token, number, boolean, byte sequence or
// string.
const PARAMETERS =
  /^(?:; *[a-z*][a-z0-9_.*-]*(?:=(?:[A-Za-z*][\w:/!#$%&'*+.^`|~-]*|-?\d+(?:\.\d+)?|\?[01]|:[A-Za-z0-9+/=]*:|"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*"))?)*$/;

const malformed = () => new ApiError('malformed_idempotency_key');

/**
 * Reads the key (before the body) into res.locals.idempotency, the fingerprint started with what
 * changes the answer besides the body; no header, nothing (the request is served as without keys).
 * @returns {import('express').RequestHandler}
 */
export function readIdempotencyKey() {
  return (req, res, next) => {
    const header = req.headers['idempotency-key'];
    if (header === undefined) return next();
    let key;
    try {
      key = parseIdempotencyKey(Array.isArray(header) ? header.join(', ') : header);
    } catch (err) {
      return next(err);
    }
    const hash = createHash('sha256');
    const mark = req.url.indexOf('?');
    hash.update(
      `${req.headers['content-type'] ?? ''}\n${joined(req.headers.prefer)}\n` +
        `${mark === -1 ? '' : req.url.slice(mark + 1)}\n`,
    );
    /** @type {Buffer | undefined} */
    let fingerprint = undefined;
    res.locals.idempotency = {
      client: req.clientScope ?? ANONYMOUS_CLIENT,
      key,
      hash,
      fingerprint: () => (fingerprint ??= hash.digest()),
    };
    next();
  };
}

/** @param {string | string[] | undefined} header */
const joined = (header) => (Array.isArray(header) ? header.join(', ') : (header ?? ''));

/**
 * Answers a request whose key was taken: the stored outcome rendered again (or an answer stored
 * whole, as it is), marked replayed and counted by client; or the catalogue's 422 (another
 * fingerprint) or 409 (in flight), thrown.
 * @param {import('express').Response} res
 * @param {import('../metrics.js').Metrics} metrics
 * @param {import('../users/write-types.js').TakenKey} taken
 * @param {Buffer} fingerprint this request's
 */
export function replayTaken(res, metrics, taken, fingerprint) {
  const stored = storedOutcomeOf(taken, fingerprint);
  const answer =
    'answer' in stored
      ? stored.answer
      : renderAnswer(
          /** @type {import('./answer.js').Rendering} */ (stored.rendering),
          stored.written,
        );
  metrics.clients.replayed((res.req.ingestClient ?? ONE_CLIENT).label);
  sendAnswer(res, answer, true);
}
