import { AdmissionRefusedError } from './admission-budget.js';

// Admission control's Express adapter: a request is admitted into the byte budget
// (http/admission-budget.js) before its body is read, or refused with 503 having read nothing.
// The adapter never reads the body itself: a body of unknown size is charged by the body reader as
// it reads, through the allowance the adapter leaves in res.locals (BodyAllowance), so nothing
// here depends on which middleware runs next, or when.

/** @typedef {import('./admission-budget.js').AdmissionBudget} AdmissionBudget */
/** @typedef {import('./admission-budget.js').Grant} Grant */
/** @typedef {import('./admission-budget.js').RefusalReason} RefusalReason */

/**
 * @typedef {object} AdmissionMetrics
 * @property {(reason: RefusalReason) => void} shed
 * @property {(seconds: number) => void} waited
 * @property {(budget: AdmissionBudget) => void} observe
 */

/**
 * What a body without a Content-Length may grow to, asked by the body reader as it reads (the
 * request's `res.locals.bodyAllowance`, set by admitRequest): given the bytes read so far, nothing
 * when they fit the request's grant (grown to hold them), or the 503 that stops the read when they
 * outgrow the budget (the grant is then given back at once).
 * @typedef {(bytesRead: number) => AdmissionRefusedError | undefined} BodyAllowance
 */

/**
 * The allowance of a body charged as it is read, within `grant`.
 * @param {AdmissionBudget} budget @param {Grant} grant @param {AdmissionMetrics | undefined} metrics
 * @returns {BodyAllowance}
 */
function allowanceOf(budget, grant, metrics) {
  /** @type {AdmissionRefusedError | undefined} */
  let refused;
  return (bytesRead) => {
    if (refused || budget.grow(grant, bytesRead)) return refused;
    budget.release(grant);
    metrics?.shed('overflow');
    refused = new AdmissionRefusedError('overflow');
    return refused;
  };
}

/**
 * Express middleware for a route with a body: admits the request into the budget before its body
 * is read, or answers 503 with Retry-After having read nothing; releases what it holds exactly once
 * when the response ends (answered, failed or abandoned by the client). A body without a
 * Content-Length is charged as it arrives: the body reader asks `res.locals.bodyAllowance`
 * (BodyAllowance) for each chunk and stops with its 503 when the body outgrows the budget.
 *
 * @param {{ budget: AdmissionBudget, maxBodyBytes: number, metrics?: AdmissionMetrics, holdBytes?: number }} options
 *   holdBytes: charge at most this, whatever the body's size (a streamed body, which holds a bounded part of
 *   itself at once); a smaller declared Content-Length is charged as it is
 * @returns {import('express').RequestHandler}
 */
export function admitRequest({ budget, maxBodyBytes, metrics, holdBytes }) {
  /** @param {import('express').Response} res @param {Grant} grant @param {boolean} asRead */
  function admitted(res, grant, asRead) {
    res.once('close', () => budget.release(grant));
    if (asRead) res.locals.bodyAllowance = allowanceOf(budget, grant, metrics);
  }

  return (req, res, next) => {
    const length = Number(req.headers['content-length']);
    const encoded = (req.headers['content-encoding'] ?? 'identity').toLowerCase() !== 'identity';
    const declared = Number.isSafeInteger(length) && req.headers['content-length'] !== undefined;
    // Over the limit: the body reader refuses it with 413 without keeping any of it.
    if (declared && length > maxBodyBytes) return next();

    // A compressed body decodes to at most maxBodyBytes, and nothing tells how much before it
    // is read: it is charged that bound.
    const upFront = holdBytes !== undefined
      ? (declared && !encoded ? Math.min(length, holdBytes) : holdBytes) // a stream: what it holds at once, at most its size
      : encoded ? maxBodyBytes : declared ? length : 0;
    const asRead = holdBytes === undefined && !declared && !encoded;
    // The common case, synchronously: under the single-user load every allocation here shows.
    const now = budget.tryAcquire(upFront);
    if (now) {
      admitted(res, now, asRead);
      return next();
    }
    waitForBudget(res, upFront).then((grant) => {
      if (!grant) return;
      admitted(res, grant, asRead);
      next();
    }, next);
  };

  /**
   * Waits for room; resolves undefined when the client left while it waited.
   * @param {import('express').Response} res @param {number} bytes
   * @returns {Promise<Grant | undefined>}
   */
  async function waitForBudget(res, bytes) {
    const aborted = new AbortController();
    const onClose = () => aborted.abort();
    res.once('close', onClose);
    const started = performance.now();
    /** @type {Grant} */
    let grant;
    try {
      grant = await budget.acquire(bytes, aborted.signal);
    } catch (err) {
      if (err instanceof AdmissionRefusedError) metrics?.shed(err.reason);
      // A client that left waiting gets no answer; the error handler sees the closed response.
      throw err;
    } finally {
      res.off('close', onClose);
      metrics?.waited((performance.now() - started) / 1000);
    }
    if (res.destroyed || res.writableFinished) {
      budget.release(grant);
      return undefined;
    }
    return grant;
  }
}
