import { ApiError } from '../errors.js';
import { endSpan, startSpan } from '../tracing/spans.js';
import { parseUserBatch } from './user-schema.js';

/** @typedef {import('./user-schema.js').UserRow} UserRow */
/** @typedef {import('./user-schema.js').Resolution} Resolution */
/** @typedef {(rows: UserRow[], resolution: Resolution) => Promise<import('./user-repository.js').Counts>} WriteUsers */

/**
 * The body's users as rows to write, checked as a batch; the parsed objects are let go, since they
 * are twice the rows' size and the longest wait, on the database, is still ahead.
 * @param {import('express').Request} req
 * @param {number} maxBatchItems
 * @param {Resolution} resolution
 */
function takeBatch(req, maxBatchItems, resolution) {
  const items = req.body;
  req.body = undefined;
  if (!Array.isArray(items)) throw new ApiError('not_an_array');
  if (items.length === 0) throw new ApiError('empty_batch');
  if (items.length > maxBatchItems) throw new ApiError('too_many_items', `${items.length} users is over MAX_BATCH_ITEMS (${maxBatchItems}); split the batch`);
  return { received: items.length, rows: parseUserBatch(items, resolution) };
}

/**
 * The last step of POST /users (app.js puts authentication, the Prefer header, admission and the
 * body reader before it): validate every item, write all or nothing, answer the counts.
 *
 * @param {{ writeUsers: WriteUsers, maxBatchItems: number, metrics: import('../metrics.js').Metrics }} deps
 * @returns {import('express').RequestHandler}
 */
export function postUsers({ writeUsers, maxBatchItems, metrics }) {
  return async (req, res) => {
    const resolution = /** @type {Resolution} */ (res.locals.resolution ?? 'ignore');
    const validation = startSpan('sluice.validate');
    let batch;
    try {
      batch = takeBatch(req, maxBatchItems, resolution);
    } catch (err) {
      endSpan(validation, err);
      throw err;
    }
    endSpan(validation);
    const { received, rows } = batch;
    const endTimer = metrics.insertDuration.startTimer();
    const { inserted, updated } = await writeUsers(rows, resolution);
    endTimer();

    metrics.batchSize.observe(received);
    metrics.usersReceived.inc(received);
    metrics.usersInserted.inc(inserted);
    if (updated > 0) metrics.usersUpdated.inc(updated);
    if (res.locals.preferenceApplied) res.setHeader('Preference-Applied', res.locals.preferenceApplied);
    // Written directly rather than through res.status().json(): Express's checks of the status, the
    // type and the body are a few percent of a single-user request's CPU, and this answer never varies.
    const body = JSON.stringify({ received, inserted, updated, duplicates: received - inserted });
    res.writeHead(inserted > 0 ? 201 : 200, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) }).end(body);
  };
}
