import { ApiError, emptyBatchMessage } from '../errors.js';
import { READ_COLUMNS } from '../http/write-query.js';
import { NO_TRACING } from '../tracing/tracing.js';
import { representation } from './representation.js';
import { checkUserBatch, oncePerEmail } from './user-schema.js';

/** @typedef {import('./user-schema.js').UserRow} UserRow */
/** @typedef {import('./user-schema.js').Resolution} Resolution */
/** @typedef {(rows: UserRow[], resolution: Resolution, options?: import('./user-repository.js').WriteOptions) => Promise<import('./user-repository.js').Counts>} WriteUsers */

const WITH_ROWS = Object.freeze({ withRows: true });

/**
 * The body's users as rows to write, checked as a batch; the parsed objects are let go, since they
 * are twice the rows' size and the longest wait, on the database, is still ahead.
 * @param {import('express').Request} req
 * @param {number} maxBatchItems
 * @param {Resolution} resolution
 * @param {string[] | undefined} columns  ?columns: only these keys of each object are read
 * @param {boolean} inOrder  also answer the rows in the order sent, repeats included (for a representation)
 */
function takeBatch(req, maxBatchItems, resolution, columns, inOrder) {
  let items = req.body;
  req.body = undefined;
  if (!Array.isArray(items)) throw new ApiError('not_an_array');
  if (items.length === 0) throw new ApiError('empty_batch', emptyBatchMessage(maxBatchItems));
  if (items.length > maxBatchItems) throw new ApiError('too_many_items', `${items.length} users is over MAX_BATCH_ITEMS (${maxBatchItems}); split the batch`);
  if (columns) items = items.map((item) => onlyColumns(item, columns));
  const checked = checkUserBatch(items);
  // The rows written are sorted by email (in place), so the rows in the order sent are kept apart.
  const sent = inOrder ? checked.slice() : undefined;
  return { received: items.length, rows: oncePerEmail(checked, resolution), sent };
}

/**
 * An object with only the keys ?columns names (PostgREST ignores the others); anything that is not
 * an object stays as it is, for the validator to name.
 * @param {unknown} item @param {readonly string[]} columns
 */
function onlyColumns(item, columns) {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) return item;
  /** @type {Record<string, unknown>} */
  const kept = {};
  for (const c of columns) if (Object.hasOwn(item, c)) kept[c] = /** @type {Record<string, unknown>} */ (item)[c];
  return kept;
}

/**
 * The last step of POST /users (app.js puts authentication, the Prefer header, the query,
 * admission and the body reader before it): validate every item, write all or nothing, answer.
 *
 * The answer is sluice's counts, unless `Prefer: return=...` asks otherwise (PostgREST's
 * vocabulary): `representation` answers the rows written; `minimal` and `headers-only` nothing.
 * `count=exact` adds `Content-Range: *\/<rows inserted or updated>`.
 *
 * @param {{ writeUsers: WriteUsers, maxBatchItems: number, metrics: import('../metrics.js').Metrics, tracing?: import('../tracing/tracing.js').Tracing }} deps
 *   tracing: validation is a step of the request's trace (off unless handed one)
 * @returns {import('express').RequestHandler}
 */
export function postUsers({ writeUsers, maxBatchItems, metrics, tracing = NO_TRACING }) {
  return async (req, res) => {
    const resolution = /** @type {Resolution} */ (res.locals.resolution ?? 'ignore');
    const returnPreference = /** @type {import('../http/prefer.js').Preferences['return']} */ (res.locals.returnPreference);
    const query = /** @type {import('../http/write-query.js').WriteQuery | undefined} */ (res.locals.writeQuery);
    const withRows = returnPreference === 'representation';
    const validation = tracing.startStep('sluice.validate');
    let batch;
    try {
      batch = takeBatch(req, maxBatchItems, resolution, query?.columns, withRows);
    } catch (err) {
      tracing.endStep(validation, err);
      throw err;
    }
    tracing.endStep(validation);
    const { received, rows, sent } = batch;
    const endTimer = metrics.insertDuration.startTimer();
    const { inserted, updated, users } = await writeUsers(rows, resolution, withRows ? WITH_ROWS : undefined);
    endTimer();

    metrics.batchSize.observe(received);
    const shown = withRows ? representation(/** @type {UserRow[]} */ (sent), users ?? [], query?.select ?? READ_COLUMNS) : undefined;
    answerWritten(res, metrics, { received, inserted, updated }, shown);
  };
}

/**
 * Counts what a request wrote (a batch, or a stream: users/stream-import.js) and answers it: the
 * rows of a representation when given; else sluice's counts (in merge mode with `stale`, the items
 * that wrote nothing), or no body when `Prefer: return=`
 * asked for minimal or headers-only; `Preference-Applied` and `Content-Range` as asked.
 * @param {import('express').Response} res @param {import('../metrics.js').Metrics} metrics
 * @param {{ received: number, inserted: number, updated: number }} counts
 * @param {string} [rows]  return=representation's rows, as JSON text (representation.js)
 */
export function answerWritten(res, metrics, { received, inserted, updated }, rows) {
  metrics.usersReceived.inc(received);
  metrics.usersInserted.inc(inserted);
  if (updated > 0) metrics.usersUpdated.inc(updated);
  const merge = res.locals.resolution === 'merge';
  // Merge mode: every item that wrote nothing was not a newer change than the row stored (or than
  // another item of its email in the request), so inserted + updated + stale = received.
  const stale = merge ? received - inserted - updated : 0;
  if (stale > 0) metrics.usersStale.inc(stale);
  if (res.locals.preferenceApplied) res.setHeader('Preference-Applied', res.locals.preferenceApplied);
  if (res.locals.countRows) res.setHeader('Content-Range', `*/${inserted + updated}`);
  const status = inserted > 0 ? 201 : 200;
  if (rows === undefined && res.locals.returnPreference !== undefined) {
    res.writeHead(status, { 'Content-Length': 0 }).end();
    return;
  }
  // Written directly rather than through res.status().json(): Express's checks of the status, the
  // type and the body are a few percent of a single-user request's CPU, and this answer never varies.
  if (rows !== undefined) {
    // Encoded once: a representation is kilobytes, which byteLength and end would each walk.
    const body = Buffer.from(rows);
    res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': body.length }).end(body);
    return;
  }
  const body = JSON.stringify(merge ? { received, inserted, updated, stale, duplicates: received - inserted } : { received, inserted, updated, duplicates: received - inserted });
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) }).end(body);
}
