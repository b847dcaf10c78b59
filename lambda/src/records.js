import { frozenWords } from '@sluice/env';
import { messageGroupOf, poison } from './failure-ledger.js';

/**
 * @typedef {{ messageId: string, body: string,
 *   messageAttributes?: Record<string, { stringValue?: string }>,
 *   attributes?: { MessageGroupId?: string } }} SqsRecordLike
 */
/** @typedef {'ignore' | 'merge'} Resolution */
/** @typedef {'quarantine' | 'refuse'} InvalidUsers */
/**
 * @typedef {{ messageId: string, user: unknown, resolution: Resolution, invalid: InvalidUsers,
 *   group?: string }} Item
 */

/** The `resolution` attribute's values: the service's Prefer names. */
const RESOLUTIONS = Object.freeze({
  'ignore-duplicates': 'ignore',
  'merge-duplicates': 'merge',
});
const INVALID_USERS = frozenWords(['quarantine', 'refuse']);

/**
 * A body that is not JSON or not users, or an unknown attribute value, poisons its message alone.
 * @param {SqsRecordLike[]} records @param {Resolution} [defaultResolution]
 * @param {InvalidUsers} [defaultInvalid]
 * @returns {{ items: Item[], poisoned: Map<string, import('./failure-ledger.js').Failure> }}
 */
export function unpackRecords(
  records,
  defaultResolution = 'ignore',
  defaultInvalid = 'quarantine',
) {
  /** @type {Item[]} */
  const items = [];
  /** @type {Map<string, import('./failure-ledger.js').Failure>} */
  const poisoned = new Map();
  for (const record of records) {
    const { messageId, body, messageAttributes } = record;
    const asked = messageAttributes?.resolution?.stringValue;
    const resolution =
      asked === undefined
        ? defaultResolution
        : Object.hasOwn(RESOLUTIONS, asked)
          ? RESOLUTIONS[/** @type {keyof typeof RESOLUTIONS} */ (asked)]
          : undefined;
    if (!resolution) {
      poisoned.set(
        messageId,
        poison('the resolution attribute must be merge-duplicates or ignore-duplicates'),
      );
      continue;
    }
    const invalidAsked = messageAttributes?.invalid?.stringValue;
    const invalid =
      invalidAsked === undefined ? defaultInvalid : INVALID_USERS.find((w) => w === invalidAsked);
    if (!invalid) {
      poisoned.set(messageId, poison('the invalid attribute must be quarantine or refuse'));
      continue;
    }
    let parsed;
    try {
      parsed = JSON.parse(body);
    } catch {
      poisoned.set(messageId, poison('body is not JSON'));
      continue;
    }
    const users = Array.isArray(parsed) ? parsed : [parsed];
    if (
      users.length === 0 ||
      users.some((u) => u === null || typeof u !== 'object' || Array.isArray(u))
    ) {
      poisoned.set(messageId, poison('body must be a user object or a non-empty array of them'));
      continue;
    }
    const group = messageGroupOf(record);
    for (const user of users)
      items.push(
        group === undefined
          ? { messageId, user, resolution, invalid }
          : { messageId, user, resolution, invalid, group },
      );
  }
  return { items, poisoned };
}
