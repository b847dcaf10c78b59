import { AdmissionRefusedError } from './admission-budget.js';
import { ONE_CLIENT } from './fair-share.js';

/** @typedef {import('./admission-budget.js').AdmissionBudget} AdmissionBudget */
/** @typedef {import('./admission-budget.js').Grant} Grant */
/**
 * @typedef {{ shed: (reason: import('./admission-budget.js').RefusalReason) => void,
 *   waited: (seconds: number) => void,
 *   observe: (budget: AdmissionBudget) => void }} AdmissionMetrics
 */
/**
 * @typedef {{ refused: (label: string, reason: 'share' | 'budget') => void,
 *   waited: (label: string, seconds: number) => void }} ClientAdmissionMetrics
 */
/**
 * @typedef {{ budget: AdmissionBudget, metrics?: AdmissionMetrics,
 *   clientMetrics?: ClientAdmissionMetrics }} Admission
 */
/**
 * Nothing while the bytes read so far fit (the grant grown), else the 503 that stops the read.
 * @typedef {(bytesRead: number) => AdmissionRefusedError | undefined} BodyAllowance
 */

/** @param {Admission} admission @param {Grant} grant @returns {BodyAllowance} */
function allowanceOf({ budget, metrics, clientMetrics }, grant) {
  /** @type {AdmissionRefusedError | undefined} */
  let refused = undefined;
  return (bytesRead) => {
    if (refused || budget.grow(grant, bytesRead)) return refused;
    budget.release(grant);
    metrics?.shed('overflow');
    clientMetrics?.refused(grant.client.label, 'budget');
    refused = new AdmissionRefusedError('overflow');
    return refused;
  };
}

/**
 * Admits a request before its body is read, or 503 having read nothing; its hold ends with the
 * response. holdBytes: charge at most this (a stream holds a bounded part).
 * @param {Admission & { maxBodyBytes: number, holdBytes?: number }} options
 * @returns {import('express').RequestHandler}
 */
export function admitRequest({ budget, maxBodyBytes, metrics, clientMetrics, holdBytes }) {
  /** @type {Admission} */
  const admission = { budget, metrics, clientMetrics };
  /** @param {import('express').Response} res @param {Grant} grant @param {boolean} asRead */
  function admitted(res, grant, asRead) {
    res.once('close', () => budget.release(grant));
    if (asRead) res.locals.bodyAllowance = allowanceOf(admission, grant);
  }

  return (req, res, next) => {
    const length = Number(req.headers['content-length']);
    const encoded = (req.headers['content-encoding'] ?? 'identity').toLowerCase() !== 'identity';
    const declared = Number.isSafeInteger(length) && req.headers['content-length'] !== undefined;
    // Over the limit: the body reader refuses it with 413 without keeping any of it.
    if (declared && length > maxBodyBytes) return next();

    // A compressed body is charged maxBodyBytes: its decoded size is unknown until read.
    const upFront =
      holdBytes !== undefined
        ? declared && !encoded
          ? Math.min(length, holdBytes)
          : holdBytes // a stream: what it holds at once, at most its size
        : encoded
          ? maxBodyBytes
          : declared
            ? length
            : 0;
    const asRead = holdBytes === undefined && !declared && !encoded;
    // The common case, synchronously: under the single-user load every allocation here shows.
    const client = req.ingestClient ?? ONE_CLIENT;
    const now = budget.tryAcquire(upFront, client);
    if (now) {
      admitted(res, now, asRead);
      return next();
    }
    waitForBudget(admission, res, upFront, client).then((grant) => {
      if (!grant) return;
      admitted(res, grant, asRead);
      next();
    }, next);
  };
}

/**
 * Waits for room; undefined when the client left meanwhile.
 * @param {Admission} admission @param {import('express').Response} res @param {number} bytes
 * @param {import('./fair-share.js').FairClient} client @returns {Promise<Grant | undefined>}
 */
async function waitForBudget({ budget, metrics, clientMetrics }, res, bytes, client) {
  const aborted = new AbortController();
  const onClose = () => aborted.abort();
  res.once('close', onClose);
  const started = performance.now();
  /** @type {Grant} */
  let grant;
  try {
    grant = await budget.acquire(bytes, aborted.signal, client);
  } catch (err) {
    if (err instanceof AdmissionRefusedError) {
      metrics?.shed(err.reason);
      if (err.reason !== 'aborted')
        clientMetrics?.refused(client.label, err.reason === 'share' ? 'share' : 'budget');
    }
    // A client that left waiting gets no answer; the error handler sees the closed response.
    throw err;
  } finally {
    res.off('close', onClose);
    const seconds = (performance.now() - started) / 1000;
    metrics?.waited(seconds);
    clientMetrics?.waited(client.label, seconds);
  }
  if (res.destroyed || res.writableFinished) {
    budget.release(grant);
    return undefined;
  }
  return grant;
}
