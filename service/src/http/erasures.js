import { ApiError, emptyBatchMessage } from '../errors.js';
import { checkErasures } from '../users/erasure-items.js';
import { eraseUsers } from '../users/erase.js';
import { storedOutcomeOf } from '../users/idempotency-keys.js';
import { emailsOfFilter } from './email-filter.js';
import { ONE_CLIENT } from './fair-share.js';
import { pick } from './representation.js';
import { READ_COLUMNS } from './write-query.js';

// The two ways to erase: PostgREST's `DELETE /users?email=…` (answered as PostgREST answers: 204,
// or the erased rows with `Prefer: return=representation`, Content-Range with `count=exact`), and
// `POST /erasures`, a batch of `{email, changedAt?}` answered with its counts. Each erasure is
// counted, and logged once with its client and counts: never an email.

/** @import { Erasure, Erased } from '../users/erase.js' */
/** @import { IdempotencyKey, KeyTaken } from '../users/write-types.js' */

/**
 * @typedef {{ db: import('../db/database.js').Database,
 *   erasures: import('../users/erasure-guard.js').ErasureGuard,
 *   keys?: import('../users/idempotency-keys.js').KeyStore,
 *   policy: import('../users/write-policy.js').WritePolicy,
 *   metrics: import('../metrics.js').Metrics, maxBatchItems: number }} ErasureDeps
 */

/**
 * The erasure, counted and logged; or, under a key taken, what it holds.
 * @param {ErasureDeps} deps @param {import('express').Request} req @param {Erasure[]} items
 * @param {IdempotencyKey} [key]
 */
async function erase({ db, erasures, keys, policy, metrics }, req, items, key) {
  const erased = await eraseUsers({ db, erasures, keys, policy }, { items, key });
  if ('taken' in erased) return erased;
  metrics.usersErased.inc(erased.erased);
  const { received, absent } = erased;
  const client = (req.ingestClient ?? ONE_CLIENT).label;
  req.log.info({ client, received, erased: erased.erased, absent }, 'erasure');
  return erased;
}

/** DELETE /users. @param {ErasureDeps} deps @returns {import('express').RequestHandler} */
export function deleteUsers(deps) {
  return async (req, res) => {
    const mark = req.url.indexOf('?');
    const emails = emailsOfFilter(mark === -1 ? '' : req.url.slice(mark + 1));
    if (emails.length > deps.maxBatchItems) throw tooMany(emails.length, deps.maxBatchItems);
    const options = res.locals.write;
    const items = emails.map((email) => ({ email, changedAt: null }));
    const { erased, users } = /** @type {Erased} */ (await erase(deps, req, items));
    if (options.count) res.setHeader('Content-Range', `*/${erased}`);
    if (options.return !== 'representation') return res.status(204).end();
    const select = options.query.select ?? [...READ_COLUMNS];
    res.status(200).json(users.map((user) => pick(user, select)));
  };
}

/** POST /erasures. @param {ErasureDeps} deps @returns {import('express').RequestHandler} */
export function postErasures(deps) {
  return async (req, res) => {
    const items = req.body;
    req.body = undefined;
    if (!Array.isArray(items))
      throw new ApiError('not_an_array', 'the body must be a JSON array of erasures');
    if (items.length === 0)
      throw new ApiError('empty_batch', emptyBatchMessage(deps.maxBatchItems));
    if (items.length > deps.maxBatchItems) throw tooMany(items.length, deps.maxBatchItems);
    const requestKey = res.locals.idempotency;
    const key = requestKey && {
      client: requestKey.client,
      key: requestKey.key,
      fingerprint: requestKey.fingerprint(),
      rendering: ERASURE,
    };
    const erased = await erase(deps, req, checkErasures(items), key);
    if ('taken' in erased) return replay(res, erased, /** @type {Buffer} */ (key?.fingerprint));
    const { received, absent } = erased;
    res.status(200).json({ received, erased: erased.erased, absent });
  };
}

/** What an erasure's key holds beside its counts: that it is one. */
const ERASURE = Object.freeze({ erasure: true });

/**
 * The counts a key holds, again; another request's under it: 422 (409 in flight).
 * @param {import('express').Response} res @param {KeyTaken} erased @param {Buffer} fingerprint
 */
function replay(res, { taken }, fingerprint) {
  const stored = storedOutcomeOf(taken, fingerprint);
  if ('answer' in stored || !(/** @type {any} */ (stored.rendering)?.erasure))
    throw new ApiError('idempotency_key_reused');
  const { received, erased, absent } = /** @type {any} */ (stored.written);
  res.setHeader('Idempotent-Replayed', 'true');
  res.status(200).json({ received, erased, absent });
}

/** @param {number} n @param {number} max */
const tooMany = (n, max) =>
  new ApiError('too_many_items', `${n} emails is over MAX_BATCH_ITEMS (${max}); split them`);
