/**
 * Which messages of a batch failed, and why. On a FIFO queue (records with a MessageGroupId) it
 * also keeps, for each group, its first failed message: every later message of that group fails
 * with it (`held`), posted or not, so that SQS hands them back after it, in order. One record of
 * failed groups serves both questions: what a chunk may still post, and what the batch answers
 * (Powertools' SqsFifoPartialProcessor with skipGroupOnError does the same per record).
 *
 * A failure is a value: `poison` (it will never be stored as it is), `unavailable` (the service
 * could not take it: it may later) or `held`. Its reason names the rule or an error id, never a user.
 * @typedef {{ kind: 'poison' | 'unavailable' | 'held', reason: string }} Failure
 * @typedef {{ messageId: string, attributes?: { MessageGroupId?: string } }} GroupedRecord
 */

/** @param {GroupedRecord} record @returns {string | undefined} */
export const messageGroupOf = (record) => record.attributes?.MessageGroupId;

/** @param {string} reason @returns {Failure} */
export const poison = (reason) => ({ kind: 'poison', reason });

/** @param {GroupedRecord[]} records  the batch, in the order Lambda delivered it */
export function createFailureLedger(records) {
  const position = new Map(records.map((record, index) => [record.messageId, { index, group: messageGroupOf(record) }]));
  /** @type {Map<string, Failure>} each message's own failure */
  const own = new Map();
  /** @type {Map<string | undefined, { index: number, messageId: string }>} each failed group's first failed message (none counts for messages without a group) */
  const failedGroups = new Map();

  /** The message's group failed at an earlier message: the one it waits behind. @param {string} messageId */
  function heldBehind(messageId) {
    const at = position.get(messageId);
    const first = at?.group === undefined ? undefined : failedGroups.get(at.group);
    return first !== undefined && at !== undefined && first.index < at.index ? first.messageId : undefined;
  }

  return {
    fifo: records.some((record) => messageGroupOf(record) !== undefined),

    /** A failure never replaces poison. @param {string} messageId @param {Failure} failure */
    fail(messageId, failure) {
      if (own.get(messageId)?.kind !== 'poison') own.set(messageId, failure);
      const at = position.get(messageId);
      const first = at && failedGroups.get(at.group);
      if (at && (first === undefined || at.index < first.index)) failedGroups.set(at.group, { index: at.index, messageId });
    },

    /** Whether the message failed, on its own or behind its group's. @param {string} messageId */
    hasFailed: (messageId) => own.has(messageId) || heldBehind(messageId) !== undefined,

    /** Every failed message, in the batch's order. */
    failures() {
      /** @type {Map<string, Failure>} */
      const all = new Map();
      for (const { messageId } of records) {
        const failure = own.get(messageId);
        const behind = failure ? undefined : heldBehind(messageId);
        if (failure) all.set(messageId, failure);
        else if (behind) all.set(messageId, { kind: 'held', reason: `an earlier message of its group failed (${behind})` });
      }
      return all;
    },
  };
}

/** @typedef {ReturnType<typeof createFailureLedger>} FailureLedger */
