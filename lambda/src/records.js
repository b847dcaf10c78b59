import { frozenWords } from '@sluice/env';
import { messageGroupOf, poison } from './failure-ledger.js';

/**
 * @typedef {{ messageId: string, body: string,
 *   messageAttributes?: Record<string, { stringValue?: string }>,
 *   attributes?: { MessageGroupId?: string } }} SqsRecordLike
 */
/** @typedef {'ignore' | 'merge'} Resolution */
/** @typedef {'quarantine' | 'refuse'} InvalidUsers */
/** @typedef {'upsert' | 'erase'} Operation */
/** @typedef {import('./failure-ledger.js').Failure} Failure */
/**
 * `user`: what is posted for it, a user to store or (erase) the `{email, changedAt?}` naming one
 * to erase. An erasure has no Prefer: its resolution and invalid are the feeder's, unused.
 * @typedef {{ messageId: string, operation: Operation, user: unknown, resolution: Resolution,
 *   invalid: InvalidUsers, group?: string }} Item
 */
/** @typedef {{ operation: Operation, resolution: Resolution, invalid: InvalidUsers }} Options */

/** The `resolution` attribute's values: the service's Prefer names. */
const RESOLUTIONS = Object.freeze({
  'ignore-duplicates': 'ignore',
  'merge-duplicates': 'merge',
});
const INVALID_USERS = frozenWords(['quarantine', 'refuse']);
const OPERATIONS = frozenWords(['upsert', 'erase']);

/**
 * A body that is not JSON, not users or not erasures, or an unknown attribute value, poisons its
 * message alone.
 * @param {SqsRecordLike[]} records @param {Resolution} [defaultResolution]
 * @param {InvalidUsers} [defaultInvalid]
 * @returns {{ items: Item[], poisoned: Map<string, Failure> }}
 */
export function unpackRecords(
  records,
  defaultResolution = 'ignore',
  defaultInvalid = 'quarantine',
) {
  /** @type {Item[]} */
  const items = [];
  /** @type {Map<string, Failure>} */
  const poisoned = new Map();
  const defaults = { resolution: defaultResolution, invalid: defaultInvalid };
  for (const record of records) {
    const { messageId } = record;
    const options = optionsOf(record, defaults);
    if ('kind' in options) {
      poisoned.set(messageId, options);
      continue;
    }
    const payloads = payloadsOf(record.body, options.operation);
    if (!Array.isArray(payloads)) {
      poisoned.set(messageId, payloads);
      continue;
    }
    const { operation, resolution, invalid } = options;
    const group = messageGroupOf(record);
    for (const user of payloads)
      items.push(
        group === undefined
          ? { messageId, operation, user, resolution, invalid }
          : { messageId, operation, user, resolution, invalid, group },
      );
  }
  return { items, poisoned };
}

/**
 * The message's attributes, else the feeder's: no `operation` is an upsert.
 * @param {SqsRecordLike} record @param {{ resolution: Resolution, invalid: InvalidUsers }} defaults
 * @returns {Options | Failure}
 */
function optionsOf({ messageAttributes }, defaults) {
  const operationAsked = messageAttributes?.operation?.stringValue;
  const operation =
    operationAsked === undefined ? 'upsert' : OPERATIONS.find((w) => w === operationAsked);
  if (!operation) return poison('the operation attribute must be upsert or erase');
  if (operation === 'erase') return { operation, ...defaults };
  const asked = messageAttributes?.resolution?.stringValue;
  const resolution =
    asked === undefined
      ? defaults.resolution
      : Object.hasOwn(RESOLUTIONS, asked)
        ? RESOLUTIONS[/** @type {keyof typeof RESOLUTIONS} */ (asked)]
        : undefined;
  if (!resolution)
    return poison('the resolution attribute must be merge-duplicates or ignore-duplicates');
  const invalidAsked = messageAttributes?.invalid?.stringValue;
  const invalid =
    invalidAsked === undefined ? defaults.invalid : INVALID_USERS.find((w) => w === invalidAsked);
  if (!invalid) return poison('the invalid attribute must be quarantine or refuse');
  return { operation, resolution, invalid };
}

/**
 * What a body holds to post, one item or an array of them.
 * @param {string} body @param {Operation} operation @returns {unknown[] | Failure}
 */
function payloadsOf(body, operation) {
  let parsed;
  try {
    parsed = JSON.parse(body);
  } catch {
    return poison('body is not JSON');
  }
  const list = Array.isArray(parsed) ? parsed : [parsed];
  return operation === 'erase' ? erasuresOf(list) : usersOf(list);
}

/** @param {unknown} value */
const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);

/** Checking a user's fields is the service's job. @param {unknown[]} list */
function usersOf(list) {
  if (list.length === 0 || !list.every(isObject))
    return poison('body must be a user object or a non-empty array of them');
  return list;
}

/**
 * An email alone becomes `{email}`: the service's bulk form takes objects only. Checking an
 * object's fields is the service's job, as for users. @param {unknown[]} list
 */
function erasuresOf(list) {
  if (list.length === 0 || !list.every((e) => typeof e === 'string' || isObject(e)))
    return poison(
      'an erase body must be an email, an {email, changedAt} object or a non-empty array of them',
    );
  return list.map((e) => (typeof e === 'string' ? { email: e } : e));
}
