import { ApiError, emptyBatchMessage } from '../errors.js';
import { NO_TRACING } from '../tracing/tracing.js';
import { setAsideInvalid } from '../users/quarantine.js';
import { checkUserBatch, oncePerEmail } from '../users/user-schema.js';
import { answerWritten, countWritten, sendAnswer, writtenAnswer } from './answer.js';
import { keyForWriter, replayTaken } from './idempotency-key.js';
import { quarantineOf } from './quarantine-request.js';
import { representation } from './representation.js';
import { READ_COLUMNS } from './write-query.js';

// The last step of a JSON POST /users (app.js puts authentication, the write options, admission and
// the body reader before it): every item checked, the rows written all or nothing, answered; with
// `Prefer: invalid=quarantine`, the invalid items set aside and kept with them; with an
// Idempotency-Key, the answer stored with the rows, or the one stored under the key replayed.

/**
 * @typedef {import('../users/user-schema.js').UserRow} UserRow
 * @typedef {import('../users/user-schema.js').Resolution} Resolution
 */
/**
 * @typedef {(rows: UserRow[], resolution: Resolution,
 *   options?: import('../users/user-writer.js').WriteOptions) =>
 *   Promise<import('../users/user-writer.js').Outcome>} WriteUsers
 */

const WITH_ROWS = Object.freeze({ withRows: true });

/**
 * The body's users as rows, checked as a batch (the parsed objects let go), or the invalid ones set
 * aside into `quarantine`; inOrder: the rows as sent too.
 * @param {import('express').Request} req
 * @param {number} maxBatchItems
 * @param {Resolution} resolution
 * @param {string[] | undefined} columns
 * @param {boolean} inOrder
 * @param {import('../users/quarantine.js').Quarantine} [quarantine]
 * @param {import('../errors.js').ItemError[]} [duplicateKeys] the users that give a key twice
 *   (json-body.js)
 */
function takeBatch(req, maxBatchItems, resolution, columns, inOrder, quarantine, duplicateKeys) {
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
 *   quarantineBound: import('../users/quarantine.js').ClientBound,
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
    const { resolution, return: returnPreference, query, invalid } = res.locals.write;
    const withRows = returnPreference === 'representation';
    const quarantine = invalid ? quarantineOf(req, 'json', invalid, quarantineBound) : undefined;
    // Counted for the rate limit before the checks, so a refused array is charged its users.
    if (Array.isArray(req.body)) res.locals.bodyUsers = req.body.length;
    const validation = tracing.startStep('sluice.validate');
    let batch;
    try {
      batch = takeBatch(
        req,
        maxBatchItems,
        resolution,
        query.columns,
        withRows,
        quarantine,
        res.locals.duplicateKeys,
      );
    } catch (err) {
      tracing.endStep(validation, err);
      throw err;
    }
    tracing.endStep(validation);
    const { received, rows, sent } = batch;
    const key = res.locals.idempotency;
    /**
     * @param {{ inserted: number, updated: number,
     *   users?: import('../users/user-writer.js').WrittenUser[] }} written
     */
    const shown = ({ users }) =>
      withRows
        ? representation(/** @type {UserRow[]} */ (sent), users ?? [], query.select ?? READ_COLUMNS)
        : undefined;
    const options = key
      ? {
          withRows,
          key: keyForWriter(key, (counts) =>
            writtenAnswer(
              res.locals.write,
              { received, inserted: counts.inserted, updated: counts.updated, quarantine },
              shown(counts),
            ),
          ),
        }
      : withRows
        ? WITH_ROWS
        : undefined;
    const endTimer = metrics.insertDuration.startTimer();
    const setAside = quarantine && quarantine.count > 0 ? quarantine : undefined;
    const outcome = await writeUsers(
      rows,
      resolution,
      setAside ? { ...options, withRows, quarantine: setAside } : options,
    );
    endTimer();
    if ('taken' in outcome)
      return replayTaken(
        res,
        metrics,
        /** @type {import('./idempotency-key.js').RequestKey} */ (key),
        outcome.taken,
      );

    metrics.batchSize.observe(received);
    const counts = { received, inserted: outcome.inserted, updated: outcome.updated, quarantine };
    if (!outcome.answer) return answerWritten(res, metrics, counts, shown(outcome));
    countWritten(res, metrics, counts);
    sendAnswer(res, outcome.answer);
  };
}
