import { PoisonMessageError } from './errors.js';

/** @typedef {{ messageId: string, body: string }} SqsRecordLike */
/** @typedef {{ messageId: string, user: unknown }} Item */

/**
 * Unpacks each record's body (one user object, or an array of them) into items that remember
 * their message. A body that is not JSON, or not an object or array of objects, is poison: that
 * message fails alone and the others go on.
 *
 * @param {SqsRecordLike[]} records
 * @returns {{ items: Item[], poisoned: Map<string, PoisonMessageError> }}
 */
export function unpackRecords(records) {
  /** @type {Item[]} */
  const items = [];
  /** @type {Map<string, PoisonMessageError>} */
  const poisoned = new Map();
  for (const { messageId, body } of records) {
    let parsed;
    try {
      parsed = JSON.parse(body);
    } catch {
      poisoned.set(messageId, new PoisonMessageError('body is not JSON'));
      continue;
    }
    const users = Array.isArray(parsed) ? parsed : [parsed];
    if (users.length === 0 || users.some((u) => u === null || typeof u !== 'object' || Array.isArray(u))) {
      poisoned.set(messageId, new PoisonMessageError('body must be a user object or a non-empty array of them'));
      continue;
    }
    for (const user of users) items.push({ messageId, user });
  }
  return { items, poisoned };
}
