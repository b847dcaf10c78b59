import { messageGroupOf, poison } from './failure-ledger.js';

/** @typedef {{ messageId: string, body: string, messageAttributes?: Record<string, { stringValue?: string }>, attributes?: { MessageGroupId?: string } }} SqsRecordLike */
/** @typedef {'ignore' | 'merge'} Resolution */
/** @typedef {{ messageId: string, user: unknown, resolution: Resolution, group?: string }} Item */

/** The `resolution` attribute's values: the service's Prefer names. */
const RESOLUTIONS = /** @type {const} */ ({ 'ignore-duplicates': 'ignore', 'merge-duplicates': 'merge' });

/**
 * Each record's body (one user object, or an array of them) as items that remember their message,
 * group and resolution (the `resolution` attribute, else the feeder's). A body that is not JSON or
 * not users, or an unknown resolution, poisons its message alone.
 * @param {SqsRecordLike[]} records @param {Resolution} [defaultResolution]
 * @returns {{ items: Item[], poisoned: Map<string, import('./failure-ledger.js').Failure> }}
 */
export function unpackRecords(records, defaultResolution = 'ignore') {
  const items = /** @type {Item[]} */ ([]);
  const poisoned = /** @type {Map<string, import('./failure-ledger.js').Failure>} */ (new Map());
  for (const record of records) {
    const { messageId, body, messageAttributes } = record;
    const asked = messageAttributes?.resolution?.stringValue;
    const resolution = asked === undefined ? defaultResolution : Object.hasOwn(RESOLUTIONS, asked) ? RESOLUTIONS[/** @type {keyof typeof RESOLUTIONS} */ (asked)] : undefined;
    if (!resolution) {
      poisoned.set(messageId, poison('the resolution attribute must be merge-duplicates or ignore-duplicates'));
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
    if (users.length === 0 || users.some((u) => u === null || typeof u !== 'object' || Array.isArray(u))) {
      poisoned.set(messageId, poison('body must be a user object or a non-empty array of them'));
      continue;
    }
    const group = messageGroupOf(record);
    for (const user of users) items.push(group === undefined ? { messageId, user, resolution } : { messageId, user, resolution, group });
  }
  return { items, poisoned };
}
