import { ApiError, emptyBatchMessage } from '../errors.js';
import { checkErasures } from '../users/erasure-items.js';
import { eraseUsers } from '../users/erase.js';
import { emailsOfFilter } from './email-filter.js';
import { ONE_CLIENT } from './fair-share.js';
import { READ_COLUMNS } from './write-query.js';

// The two ways to erase: PostgREST's `DELETE /users?email=…` (answered as PostgREST answers: 204,
// or the erased rows with `Prefer: return=representation`, Content-Range with `count=exact`), and
// `POST /erasures`, a batch of `{email, changedAt?}` answered with its counts. Each erasure is
// counted, and logged once with its client and counts: never an email.

/** @import { Erasure } from '../users/erase.js' */

/**
 * @typedef {{ db: import('../db/database.js').Database,
 *   erasures: import('../users/erasure-guard.js').ErasureGuard,
 *   policy: import('../users/write-policy.js').WritePolicy,
 *   metrics: import('../metrics.js').Metrics, maxBatchItems: number }} ErasureDeps
 */

/**
 * @param {ErasureDeps} deps @param {import('express').Request} req @param {Erasure[]} items
 */
async function erase({ db, erasures, policy, metrics }, req, items) {
  const erased = await eraseUsers({ db, erasures, policy }, { items });
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
    const { erased, users } = await erase(
      deps,
      req,
      emails.map((email) => ({ email, changedAt: null })),
    );
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
    const { received, erased, absent } = await erase(deps, req, checkErasures(items));
    res.status(200).json({ received, erased, absent });
  };
}

/** @param {Record<string, unknown>} user @param {readonly string[]} select */
function pick(user, select) {
  /** @type {Record<string, unknown>} */
  const shown = {};
  for (const column of select) if (column in user) shown[column] = user[column];
  return shown;
}

/** @param {number} n @param {number} max */
const tooMany = (n, max) =>
  new ApiError('too_many_items', `${n} emails is over MAX_BATCH_ITEMS (${max}); split them`);
