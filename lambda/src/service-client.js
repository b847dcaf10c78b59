import { backoffMs, parseRetryAfter, sleep } from './retry.js';

/**
 * After retries. refused: retrying cannot fix it (a 4xx, the service's own 500); unavailable: 429,
 * 409, 5xx or the network until the time ran out; replayed: an earlier delivery's write's answer.
 * erased and absent: the answer of POST /erasures.
 * @typedef {{ kind: 'stored', inserted: number, updated: number, stale: number,
 *   quarantined: number, erased?: number, absent?: number, replayed?: true } | { kind: 'invalid',
 *   errors: ItemError[] } | { kind: 'tooLarge' } | { kind: 'refused', status: number,
 *   reason: string } | { kind: 'unavailable', reason: string }} PostOutcome
 */

/**
 * Typed from the service's OpenAPI document: a change to its catalogue breaks the type check.
 * @typedef {import('../../.cache/openapi/sluice-api.js').operations['postUsers']['responses']} Answers
 * @typedef {import('../../.cache/openapi/sluice-api.js').components['schemas']['ItemError']} ItemError
 * @typedef {Exclude<Answers[201]['content']['application/json'], unknown[]>} BatchResult
 * @typedef {Extract<Answers[400]['content']['application/json'],
 *   { error: 'invalid_batch' }>} InvalidBatch
 * @typedef {Answers[500]['content']['application/json']} InternalError
 */

/**
 * POST /erasures' 200, its fields checked as the rest are.
 * @typedef {{ received: number, erased: number, absent: number }} ErasureResult
 */

/** Where each operation is posted. */
export const PATHS = Object.freeze({ upsert: '/users', erase: '/erasures' });
/** @typedef {typeof PATHS[keyof typeof PATHS]} BatchPath */

/** Any other 5xx (outcome_unknown, a proxy's 502) may have written. */
const NOTHING_WRITTEN = new Set([
  'database_unavailable',
  'overloaded',
  'lock_timeout',
  'statement_timeout',
]);

const PREFER = { ignore: 'resolution=ignore-duplicates', merge: 'resolution=merge-duplicates' };
const QUARANTINE = ', invalid=quarantine';

/** @param {import('./records.js').Resolution} resolution @param {boolean} quarantine */
const preferOf = (resolution, quarantine) =>
  quarantine ? PREFER[resolution] + QUARANTINE : PREFER[resolution];

/**
 * prefer: POST /users' only.
 * @typedef {{ path: BatchPath, items: unknown[], prefer: string | undefined, timeoutMs: number,
 *   traceparent: string | undefined, idempotencyKey: string | undefined }} Attempt
 */
/**
 * lost: the attempt may have written, its answer unknown; throttled: a 429.
 * @typedef {PostOutcome & { retryAfterMs?: number, lost?: true,
 *   throttled?: boolean }} AttemptOutcome
 */

/**
 * @param {import('./config.js').FeederConfig} config @param {Attempt} attempt
 * @returns {Promise<AttemptOutcome>}
 */
async function postOnce(config, attempt) {
  const { path, items, prefer, traceparent, idempotencyKey } = attempt;
  let res;
  try {
    res = await fetch(`${config.serviceUrl}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(prefer ? { prefer } : {}),
        ...(config.ingestToken ? { authorization: `Bearer ${config.ingestToken}` } : {}),
        ...(traceparent ? { traceparent } : {}),
        ...(idempotencyKey ? { 'idempotency-key': `"${idempotencyKey}"` } : {}),
      },
      body: JSON.stringify(items),
      signal: AbortSignal.timeout(attempt.timeoutMs),
    });
  } catch (/** @type {any} */ err) {
    const cause = err?.cause?.code ?? err?.name ?? 'network error';
    return { kind: 'unavailable', reason: String(cause), lost: true };
  }
  // Read whatever the status, so the connection goes back to the pool.
  const text = await res.text().catch(() => '');
  return outcomeOf(res, safeJson(text));
}

/**
 * Typed by status, each field still checked: a proxy may answer anything.
 * @param {Response} res @param {any} body @returns {AttemptOutcome}
 */
function outcomeOf(res, body) {
  if (res.status === 200 || res.status === 201) {
    const counts = storedOf(body);
    return res.headers.get('idempotent-replayed') === 'true'
      ? { ...counts, replayed: true }
      : counts;
  }
  // The service's own 500 is this request's failure (retried, it fails the same).
  /** @type {Partial<InternalError> | undefined} */
  const failure = body;
  if (res.status === 500 && failure?.error === 'internal') {
    return {
      kind: 'refused',
      status: 500,
      reason: `HTTP 500 internal, error id ${String(failure.errorId)}`,
    };
  }
  // 409: a request with this chunk's key is still being written (an earlier attempt, or delivery).
  if (res.status === 429 || res.status === 409 || res.status >= 500) {
    /** @type {AttemptOutcome} */
    const outcome = {
      kind: 'unavailable',
      reason: `HTTP ${res.status}`,
      retryAfterMs: parseRetryAfter(res.headers.get('retry-after')),
      throttled: res.status === 429,
    };
    const said = typeof body?.error === 'string' ? body.error : undefined;
    return res.status >= 500 && !(said && NOTHING_WRITTEN.has(said))
      ? { ...outcome, lost: true }
      : outcome;
  }
  if (res.status === 413) return { kind: 'tooLarge' };
  /** @type {Partial<InvalidBatch> | undefined} */
  const invalid = body;
  if (res.status === 400 && invalid?.error === 'invalid_batch' && Array.isArray(invalid.errors)) {
    return { kind: 'invalid', errors: invalid.errors.filter((e) => Number.isInteger(e?.index)) };
  }
  return {
    kind: 'refused',
    status: res.status,
    reason: `HTTP ${res.status}${typeof body?.error === 'string' ? ` ${body.error}` : ''}`,
  };
}

/**
 * @param {Partial<BatchResult & ErasureResult> | undefined} result
 * @returns {Extract<PostOutcome, { kind: 'stored' }>}
 */
function storedOf(result) {
  const counts = {
    kind: /** @type {const} */ ('stored'),
    inserted: result?.inserted ?? 0,
    updated: result?.updated ?? 0,
    stale: result?.stale ?? 0,
    quarantined: result?.quarantined ?? 0,
  };
  if (typeof result?.erased !== 'number' && typeof result?.absent !== 'number') return counts;
  return { ...counts, erased: result?.erased ?? 0, absent: result?.absent ?? 0 };
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
 * Users to POST /users (with a Prefer of `resolution` and `quarantine`), or erasures to POST
 * /erasures. Each attempt with the same `idempotencyKey`: a replay after an attempt of ours was
 * lost is that attempt's answer, so not `replayed`. A 429 (this client over its rate) waits its
 * Retry-After.
 * @param {import('./config.js').FeederConfig} config @param {unknown[]} items
 * @param {{ path?: BatchPath, deadline: number, resolution?: import('./records.js').Resolution,
 *   quarantine?: boolean, onAttempt?: (retry: boolean) => void,
 *   traceparent?: () => string | undefined, idempotencyKey?: string }} options
 * @returns {Promise<PostOutcome>}
 */
export async function postBatch(
  config,
  items,
  {
    path = PATHS.upsert,
    deadline,
    resolution = 'ignore',
    quarantine = false,
    onAttempt = () => {},
    traceparent = () => undefined,
    idempotencyKey,
  },
) {
  const prefer = path === PATHS.upsert ? preferOf(resolution, quarantine) : undefined;
  let lostOne = false;
  for (let attempt = 0, sent = 0; ; sent++) {
    const left = deadline - Date.now();
    if (left <= 0) return { kind: 'unavailable', reason: 'no time left in the invocation' };
    onAttempt(sent > 0);
    const { lost, ...outcome } = await postOnce(config, {
      path,
      items,
      prefer,
      timeoutMs: Math.min(config.requestTimeoutMs, left),
      traceparent: traceparent(),
      idempotencyKey,
    });
    if (outcome.kind === 'stored' && outcome.replayed && lostOne) {
      const { replayed: _ours, ...counts } = outcome;
      return counts;
    }
    lostOne ||= lost === true;
    if (outcome.kind !== 'unavailable') return outcome;
    const wait =
      outcome.throttled === true && outcome.retryAfterMs !== undefined
        ? outcome.retryAfterMs
        : Math.max(
            backoffMs(attempt++, { baseMs: config.retryBaseMs, maxMs: config.retryMaxMs }),
            outcome.retryAfterMs ?? 0,
          );
    if (Date.now() + wait >= deadline) return { kind: 'unavailable', reason: outcome.reason };
    await sleep(wait);
  }
}
