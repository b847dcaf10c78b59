import { backoffMs, parseRetryAfter, sleep } from './retry.js';

/**
 * What one POST /users came to, after any retries:
 * - stored: every user is in the table (new or already there);
 * - invalid: the service refused the users at these indexes (400 invalid_batch);
 * - tooLarge: the body was over the service's limits (413);
 * - rejected: any other answer retrying cannot fix (401, other 4xx);
 * - unavailable: still 429, 5xx or a network error when the time budget ran out.
 * @typedef {{ kind: 'stored', inserted: number }
 *   | { kind: 'invalid', indexes: number[] }
 *   | { kind: 'tooLarge' }
 *   | { kind: 'rejected', status: number }
 *   | { kind: 'unavailable', reason: string }} PostOutcome
 */

/**
 * @param {import('./config.js').FeederConfig} config
 * @param {unknown[]} users
 * @param {number} timeoutMs
 * @returns {Promise<PostOutcome & { retryAfterMs?: number }>}
 */
async function postOnce(config, users, timeoutMs) {
  let res;
  try {
    res = await fetch(`${config.serviceUrl}/users`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(config.ingestToken ? { authorization: `Bearer ${config.ingestToken}` } : {}),
      },
      body: JSON.stringify(users),
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (err) {
    const cause = /** @type {any} */ (err)?.cause?.code ?? /** @type {any} */ (err)?.name ?? 'network error';
    return { kind: 'unavailable', reason: String(cause) };
  }
  // Read the body whatever the status, so the keep-alive connection goes back to the pool.
  const text = await res.text().catch(() => '');
  if (res.status === 200 || res.status === 201) {
    return { kind: 'stored', inserted: safeJson(text)?.inserted ?? 0 };
  }
  if (res.status === 429 || res.status >= 500) {
    return { kind: 'unavailable', reason: `HTTP ${res.status}`, retryAfterMs: parseRetryAfter(res.headers.get('retry-after')) };
  }
  if (res.status === 413) return { kind: 'tooLarge' };
  const body = safeJson(text);
  if (res.status === 400 && body?.error === 'invalid_batch' && Array.isArray(body.errors)) {
    return { kind: 'invalid', indexes: [...new Set(body.errors.map((/** @type {any} */ e) => e.index).filter(Number.isInteger))] };
  }
  return { kind: 'rejected', status: res.status };
}

/** @param {string} text */
function safeJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * POST /users, retrying what may pass later (429, 5xx, network errors) with full-jitter backoff,
 * never waiting less than Retry-After, and never past `deadline`.
 *
 * @param {import('./config.js').FeederConfig} config
 * @param {unknown[]} users
 * @param {{ deadline: number, onAttempt?: (retry: boolean) => void }} budget  deadline: epoch ms
 * @returns {Promise<PostOutcome>}
 */
export async function postUsers(config, users, { deadline, onAttempt = () => {} }) {
  for (let attempt = 0; ; attempt++) {
    const left = deadline - Date.now();
    if (left <= 0) return { kind: 'unavailable', reason: 'no time left in the invocation' };
    onAttempt(attempt > 0);
    const outcome = await postOnce(config, users, Math.min(config.requestTimeoutMs, left));
    if (outcome.kind !== 'unavailable') return outcome;
    const wait = Math.max(backoffMs(attempt, { baseMs: config.retryBaseMs, maxMs: config.retryMaxMs }), outcome.retryAfterMs ?? 0);
    if (Date.now() + wait >= deadline) return { kind: 'unavailable', reason: outcome.reason };
    await sleep(wait);
  }
}
