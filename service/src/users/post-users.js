import { ApiError } from '../errors.js';
import { OUTCOME, READ_COLUMNS } from '../http/write-query.js';
import { endSpan, startSpan } from '../tracing/spans.js';
import { parseUserBatch } from './user-schema.js';

/** @typedef {import('./user-schema.js').UserRow} UserRow */
/** @typedef {import('./user-schema.js').Resolution} Resolution */
/** @typedef {import('./user-repository.js').WrittenUser} WrittenUser */
/** @typedef {import('../http/write-query.js').ReadColumn} ReadColumn */
/** @typedef {(rows: UserRow[], resolution: Resolution, options?: import('./user-repository.js').WriteOptions) => Promise<import('./user-repository.js').Counts>} WriteUsers */

const WITH_ROWS = Object.freeze({ withRows: true });

/**
 * The body's users as rows to write, checked as a batch; the parsed objects are let go, since they
 * are twice the rows' size and the longest wait, on the database, is still ahead.
 * @param {import('express').Request} req
 * @param {number} maxBatchItems
 * @param {Resolution} resolution
 * @param {string[] | undefined} columns  ?columns: only these keys of each object are read
 * @param {boolean} inOrder  also answer the emails in the order sent (for a representation)
 */
function takeBatch(req, maxBatchItems, resolution, columns, inOrder) {
  let items = req.body;
  req.body = undefined;
  if (!Array.isArray(items)) throw new ApiError('not_an_array');
  if (items.length === 0) throw new ApiError('empty_batch');
  if (items.length > maxBatchItems) throw new ApiError('too_many_items', `${items.length} users is over MAX_BATCH_ITEMS (${maxBatchItems}); split the batch`);
  if (columns) items = items.map((item) => onlyColumns(item, columns));
  const rows = parseUserBatch(items, resolution);
  // Every item is a valid user by now; rows are sorted by email, so the order sent is kept apart.
  const order = inOrder ? items.map((item) => /** @type {string} */ (item.email).toLowerCase()) : undefined;
  return { received: items.length, rows, order };
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
 * The rows written, in the order their emails were first sent, each with the columns selected.
 * Emails skipped as duplicates were not written and are not in it (as in PostgREST).
 *
 * With `outcome` selected (sluice's per-item report), every item of the request instead, in order:
 * `outcome` is `inserted` or `updated` (with the row as written), `skipped` (already stored, or
 * unchanged in merge mode: nothing written, so its other columns are null but its email), or
 * `repeated` (its email came earlier in the request; that entry tells what was written).
 * @param {string[]} order @param {WrittenUser[]} users @param {readonly ReadColumn[]} select
 */
export function representation(order, users, select) {
  /** @type {Map<string, WrittenUser | null>} null: its entry is out already */
  const byEmail = new Map();
  for (const u of users) byEmail.set(u.email, u);
  const report = select.includes(OUTCOME);
  /** @type {Record<string, unknown>[]} */
  const out = [];
  for (const email of order) {
    const u = byEmail.get(email);
    if (!report) {
      if (!u) continue;
      byEmail.set(email, null); // an email sent twice is one row, shown where it was first sent
      out.push(pick(u, select));
      continue;
    }
    if (u === null) {
      out.push(pick({ email }, select, 'repeated'));
      continue;
    }
    byEmail.set(email, null);
    out.push(u ? pick(u, select, u.inserted ? 'inserted' : 'updated') : pick({ email }, select, 'skipped'));
  }
  return out;
}

/**
 * @param {Partial<WrittenUser>} u @param {readonly ReadColumn[]} select @param {string} [outcome]
 * @returns {Record<string, unknown>}
 */
function pick(u, select, outcome) {
  /** @type {Record<string, unknown>} */
  const row = {};
  for (const c of select) row[c] = c === OUTCOME ? outcome : (u[c] ?? null);
  return row;
}

/**
 * The last step of POST /users (app.js puts authentication, the Prefer header, the query,
 * admission and the body reader before it): validate every item, write all or nothing, answer.
 *
 * The answer is sluice's counts, unless `Prefer: return=...` asks otherwise (PostgREST's
 * vocabulary): `representation` answers the rows written; `minimal` and `headers-only` nothing.
 * `count=exact` adds `Content-Range: *\/<rows inserted or updated>`.
 *
 * @param {{ writeUsers: WriteUsers, maxBatchItems: number, metrics: import('../metrics.js').Metrics }} deps
 * @returns {import('express').RequestHandler}
 */
export function postUsers({ writeUsers, maxBatchItems, metrics }) {
  return async (req, res) => {
    const resolution = /** @type {Resolution} */ (res.locals.resolution ?? 'ignore');
    const returnPreference = /** @type {import('../http/prefer.js').Preferences['return']} */ (res.locals.returnPreference);
    const query = /** @type {import('../http/write-query.js').WriteQuery | undefined} */ (res.locals.writeQuery);
    const withRows = returnPreference === 'representation';
    const validation = startSpan('sluice.validate');
    let batch;
    try {
      batch = takeBatch(req, maxBatchItems, resolution, query?.columns, withRows);
    } catch (err) {
      endSpan(validation, err);
      throw err;
    }
    endSpan(validation);
    const { received, rows, order } = batch;
    const endTimer = metrics.insertDuration.startTimer();
    const { inserted, updated, users } = await writeUsers(rows, resolution, withRows ? WITH_ROWS : undefined);
    endTimer();

    metrics.batchSize.observe(received);
    answerWritten(res, metrics, { received, inserted, updated }, withRows ? representation(/** @type {string[]} */ (order), users ?? [], query?.select ?? READ_COLUMNS) : undefined);
  };
}

/**
 * Counts what a request wrote (a batch, or a stream: users/stream-import.js) and answers it: the
 * rows of a representation when given; else sluice's counts, or no body when `Prefer: return=`
 * asked for minimal or headers-only; `Preference-Applied` and `Content-Range` as asked.
 * @param {import('express').Response} res @param {import('../metrics.js').Metrics} metrics
 * @param {{ received: number, inserted: number, updated: number }} counts
 * @param {Record<string, unknown>[]} [rows]  return=representation's rows
 */
export function answerWritten(res, metrics, { received, inserted, updated }, rows) {
  metrics.usersReceived.inc(received);
  metrics.usersInserted.inc(inserted);
  if (updated > 0) metrics.usersUpdated.inc(updated);
  if (res.locals.preferenceApplied) res.setHeader('Preference-Applied', res.locals.preferenceApplied);
  if (res.locals.countRows) res.setHeader('Content-Range', `*/${inserted + updated}`);
  const status = inserted > 0 ? 201 : 200;
  if (rows === undefined && res.locals.returnPreference !== undefined) {
    res.writeHead(status, { 'Content-Length': 0 }).end();
    return;
  }
  // Written directly rather than through res.status().json(): Express's checks of the status, the
  // type and the body are a few percent of a single-user request's CPU, and this answer never varies.
  const body = JSON.stringify(rows ?? { received, inserted, updated, duplicates: received - inserted });
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) }).end(body);
}
