/**
 * FIFO queues: a message group's messages must take effect in order. Lambda hands a FIFO batch
 * over in queue order, each record carrying `attributes.MessageGroupId`; a standard queue's records
 * carry none, and nothing here applies to them.
 *
 * The rule (Powertools' `SqsFifoPartialProcessor` with `skipGroupOnError`): when a message of a
 * group fails, it and every later message of the same group in the batch are reported as failed,
 * even those that were stored, so that they come back after it and are applied again in order; the
 * other groups' messages are not touched.
 *
 * @typedef {{ messageId: string, attributes?: { MessageGroupId?: string } }} GroupedRecord
 */

/** @param {GroupedRecord} record @returns {string | undefined} */
export const messageGroupOf = (record) => record.attributes?.MessageGroupId;

/**
 * For each message of a group, the messages of its group that come after it in the batch.
 * Messages without a group have none.
 * @param {GroupedRecord[]} records
 * @returns {Map<string, string[]>}
 */
export function laterInGroup(records) {
  /** @type {Map<string, string[]>} */
  const byGroup = new Map();
  for (const record of records) {
    const group = messageGroupOf(record);
    if (group === undefined) continue;
    const ids = byGroup.get(group) ?? [];
    ids.push(record.messageId);
    byGroup.set(group, ids);
  }
  /** @type {Map<string, string[]>} */
  const later = new Map();
  for (const ids of byGroup.values()) ids.forEach((id, i) => later.set(id, ids.slice(i + 1)));
  return later;
}

/**
 * The failed messages with, for each group, every message after its first failure: those not
 * failed on their own are `held` (behind the earlier failure of their group).
 * @template {{ kind: string, reason: string }} F
 * @param {GroupedRecord[]} records  the batch, in the order Lambda delivered it
 * @param {Map<string, F>} failed
 * @returns {Map<string, F | { kind: 'held', reason: string }>}
 */
export function withHeldFollowers(records, failed) {
  /** @type {Map<string, F | { kind: 'held', reason: string }>} */
  const all = new Map(failed);
  const later = laterInGroup(records);
  for (const record of records) {
    if (!failed.has(record.messageId)) continue;
    for (const id of later.get(record.messageId) ?? []) {
      if (!all.has(id)) all.set(id, heldBehind(record.messageId));
    }
  }
  return all;
}

/** @param {string} messageId */
export const heldBehind = (messageId) => /** @type {const} */ ({ kind: 'held', reason: `an earlier message of its group failed (${messageId})` });
