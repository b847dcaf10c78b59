import { backoffMs, parseRetryAfter, sleep } from './retry.js';

/**
 * What one POST /users came to, after any retries:
 * - stored: every user is in the table (new, updated, or already there);
 * - invalid: the service refused the users named in `errors` (400 invalid_batch);
 * - tooLarge: the body was over the service's limits (413);
 * - refused: any other answer that retrying cannot fix: a 4xx, or the service's own 500 (a failure
 *   of this request alone, with its error id); not an outage;
 * - unavailable: still 429, 503, another 5xx or a network error when the time budget ran out.
 * @typedef {{ kind: 'stored', inserted: number, updated: number, stale: number }
 *   | { kind: 'invalid', errors: ItemError[] }
 *   | { kind: 'tooLarge' }
 *   | { kind: 'refused', status: number, reason: string }
 *   | { kind: 'unavailable', reason: string }} PostOutcome
 */

/**
 * The service's answers to POST /users, typed from its OpenAPI document (what GET /openapi.json
 * serves, made into .cache/openapi/sluice-api.d.ts by `npm run lint`): a change to the catalogue
 * breaks this file's type check rather than the feeder in production.
 * @typedef {import('../../.cache/openapi/sluice-api.js').operations['postUsers']['responses']} Answers
 * @typedef {import('../../.cache/openapi/sluice-api.js').components['schemas']['ItemError']} ItemError
 * @typedef {Exclude<Answers[201]['content']['application/json'], unknown[]>} BatchResult  the counts: the feeder asks for no representation
 * @typedef {Extract<Answers[400]['content']['application/json'], { error: 'invalid_batch' }>} InvalidBatch
 * @typedef {Answers[500]['content']['application/json']} InternalError
 */

/** The Prefer header of each resolution (the service's names, from PostgREST). */
const PREFER = { ignore: 'resolution=ignore-duplicates', merge: 'resolution=merge-duplicates' };

/**
 * @param {import('./config.js').FeederConfig} config
 * @param {unknown[]} users
 * @param {import('./records.js').Resolution} resolution
 * @param {number} timeoutMs
 * @param {string | undefined} traceparent  the invocation span's context (undefined, and no header, when tracing is off)
 * @returns {Promise<PostOutcome & { retryAfterMs?: number }>}
 */
async function postOnce(config, users, resolution, timeoutMs, traceparent) {
  let res;
  try {
    res = await fetch(`${config.serviceUrl}/users`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        prefer: PREFER[resolution],
        ...(config.ingestToken ? { authorization: `Bearer ${config.ingestToken}` } : {}),
        ...(traceparent ? { traceparent } : {}),
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
  const body = safeJson(text);
  // Each body read as the document types it for its status, each field still checked: a proxy in
  // between may answer anything.
  if (res.status === 200 || res.status === 201) {
    const result = /** @type {Partial<BatchResult> | undefined} */ (body);
    return { kind: 'stored', inserted: result?.inserted ?? 0, updated: result?.updated ?? 0, stale: result?.stale ?? 0 };
  }
  // The service's own 500 names a failure of this request alone (its error id is in the service's
  // log): another try would fail the same way. Any other 5xx is the way there (a proxy, a restart).
  const failure = /** @type {Partial<InternalError> | undefined} */ (body);
  if (res.status === 500 && failure?.error === 'internal') {
    return { kind: 'refused', status: 500, reason: `HTTP 500 internal, error id ${String(failure.errorId)}` };
  }
  if (res.status === 429 || res.status >= 500) {
    return { kind: 'unavailable', reason: `HTTP ${res.status}`, retryAfterMs: parseRetryAfter(res.headers.get('retry-after')) };
  }
  if (res.status === 413) return { kind: 'tooLarge' };
  const invalid = /** @type {Partial<InvalidBatch> | undefined} */ (body);
  if (res.status === 400 && invalid?.error === 'invalid_batch' && Array.isArray(invalid.errors)) {
    return { kind: 'invalid', errors: invalid.errors.filter((e) => Number.isInteger(e?.index)) };
  }
  return { kind: 'refused', status: res.status, reason: `HTTP ${res.status}${typeof body?.error === 'string' ? ` ${body.error}` : ''}` };
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
 * @param {{ deadline: number, resolution?: import('./records.js').Resolution, onAttempt?: (retry: boolean) => void,
 *   traceparent?: () => string | undefined }} options
 *   deadline: epoch ms; resolution: what the service does with a stored email (default ignore);
 *   traceparent: the header for a request made now, so the service's spans join the invocation's trace
 * @returns {Promise<PostOutcome>}
 */
export async function postUsers(config, users, { deadline, resolution = 'ignore', onAttempt = () => {}, traceparent = () => undefined }) {
  for (let attempt = 0; ; attempt++) {
    const left = deadline - Date.now();
    if (left <= 0) return { kind: 'unavailable', reason: 'no time left in the invocation' };
    onAttempt(attempt > 0);
    const outcome = await postOnce(config, users, resolution, Math.min(config.requestTimeoutMs, left), traceparent());
    if (outcome.kind !== 'unavailable') return outcome;
    const wait = Math.max(backoffMs(attempt, { baseMs: config.retryBaseMs, maxMs: config.retryMaxMs }), outcome.retryAfterMs ?? 0);
    if (Date.now() + wait >= deadline) return { kind: 'unavailable', reason: outcome.reason };
    await sleep(wait);
  }
}
