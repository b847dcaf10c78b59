import { ApiError, emptyBatchMessage } from '../errors.js';
import { NO_TRACING } from '../tracing/tracing.js';
import { setAsideInvalid } from '../users/quarantine.js';
import { checkUserBatch, oncePerEmail } from '../users/user-schema.js';
import { answerWritten, renderingOf } from './answer.js';
import { replayTaken } from './idempotency-key.js';
import { quarantineOf } from './quarantine-request.js';

// The last step of a JSON POST /users (app.js puts authentication, the write options, admission and
// the body reader before it): every item checked, the rows written all or nothing by the write
// unit, then answered from what it wrote; with `Prefer: invalid=quarantine`, the invalid items set
// aside and kept with them; with an Idempotency-Key, the outcome stored with the rows, or the one
// stored under the key replayed.

/**
 * @typedef {import('../users/user-schema.js').UserRow} UserRow
 * @typedef {import('../users/write-types.js').Resolution} Resolution
 * @typedef {import('../users/quarantine.js').Quarantine} Quarantine
 */
/**
 * @typedef {(part: import('../users/write-types.js').Part, resolution: Resolution) =>
 *   Promise<import('../users/write-types.js').Outcome>} WriteUsers
 */
/**
 * columns: only these keys of each item; inOrder: the rows as sent too; duplicateKeys: the items
 * that give a key twice (json-body.js).
 * @typedef {{ maxBatchItems: number, resolution: Resolution, columns?: string[],
 *   inOrder: boolean, quarantine?: Quarantine,
 *   duplicateKeys?: import('../errors.js').ItemError[] }} BatchRules
 */

/**
 * The body's users as rows, checked as a batch (the parsed objects let go), or the invalid ones set
 * aside into the quarantine.
 * @param {import('express').Request} req @param {BatchRules} rules
 */
function takeBatch(
  req,
  { maxBatchItems, resolution, columns, inOrder, quarantine, duplicateKeys },
) {
  let items = req.body;
  req.body = undefined;
  if (!Array.isArray(items)) throw new ApiError('not_an_array');
  if (items.length === 0) throw new ApiError('empty_batch', emptyBatchMessage(maxBatchItems));
  if (items.length > maxBatchItems)
    throw new ApiError(
      'too_many_items',
      `${items.length} users is over MAX_BATCH_ITEMS (${maxBatchItems}); split the batch`,
    );
  if (columns) items = items.map((item) => onlyColumns(item, columns));
  const checked = quarantine
    ? setAsideInvalid(items, quarantine, duplicateKeys)
    : checkUserBatch(items);
  const sent = inOrder ? checked.slice() : undefined;
  return { received: items.length, rows: oncePerEmail(checked, resolution), sent };
}

/**
 * Only the keys ?columns names (as PostgREST); a non-object stays, for the validator.
 * @param {unknown} item
 * @param {readonly string[]} columns
 */
function onlyColumns(item, columns) {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) return item;
  /** @type {Record<string, unknown>} */
  const kept = {};
  for (const c of columns)
    if (Object.hasOwn(item, c)) kept[c] = /** @type {Record<string, unknown>} */ (item)[c];
  return kept;
}

/**
 * @param {{ writeUsers: WriteUsers, maxBatchItems: number,
 *   quarantineBound: import('../users/quarantine-types.js').ClientBound,
 *   metrics: import('../metrics.js').Metrics,
 *   tracing?: import('../tracing/tracing.js').Tracing }} deps
 * @returns {import('express').RequestHandler}
 */
export function postUsers({
  writeUsers,
  maxBatchItems,
  quarantineBound,
  metrics,
  tracing = NO_TRACING,
}) {
  return async (req, res) => {
    const options = res.locals.write;
    const withRows = options.return === 'representation';
    const quarantine = options.invalid
      ? quarantineOf(req, 'json', options.invalid, quarantineBound)
      : undefined;
    // Counted for the rate limit before the checks, so a refused array is charged its users.
    if (Array.isArray(req.body)) res.locals.bodyUsers = req.body.length;
    const rules = { maxBatchItems, resolution: options.resolution, inOrder: withRows, quarantine };
    const validation = tracing.startStep('sluice.validate');
    let batch;
    try {
      const duplicateKeys = res.locals.duplicateKeys;
      batch = takeBatch(req, { ...rules, columns: options.query.columns, duplicateKeys });
    } catch (err) {
      tracing.endStep(validation, err);
      throw err;
    }
    tracing.endStep(validation);
    const rendering = renderingOf(options, batch.sent);
    const requestKey = res.locals.idempotency;
    const key = requestKey && {
      client: requestKey.client,
      key: requestKey.key,
      fingerprint: requestKey.fingerprint(),
      rendering,
    };
    const setAside = quarantine && quarantine.count > 0 ? quarantine : undefined;
    const part = {
      rows: batch.rows,
      received: batch.received,
      withRows,
      key,
      quarantine: setAside,
    };
    const endTimer = metrics.insertDuration.startTimer();
    const outcome = await writeUsers(part, options.resolution);
    endTimer();
    // A key taken: only a keyed request has one.
    if ('taken' in outcome)
      return replayTaken(res, metrics, outcome.taken, /** @type {Buffer} */ (key?.fingerprint));
    metrics.batchSize.observe(batch.received);
    answerWritten(res, metrics, { rendering, written: outcome, quarantine });
  };
}
