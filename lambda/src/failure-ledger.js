/**
 * Which messages of a batch failed, and why: poison (never storable as it is), unavailable (may be
 * later), or held. On a FIFO queue each group's first failure holds every later message of the
 * group, so SQS hands them back in order. A reason names a rule or an error id, never a user.
 * @typedef {{ kind: 'poison' | 'unavailable' | 'held', reason: string }} Failure
 * @typedef {{ messageId: string, attributes?: { MessageGroupId?: string } }} GroupedRecord
 */

/** @param {GroupedRecord} record @returns {string | undefined} */
export const messageGroupOf = (record) => record.attributes?.MessageGroupId;

/** @param {string} reason @returns {Failure} */
export const poison = (reason) => ({ kind: 'poison', reason });

/** @param {GroupedRecord[]} records  the batch, in the order Lambda delivered it */
export function createFailureLedger(records) {
  const position = new Map(
    records.map((record, index) => [record.messageId, { index, group: messageGroupOf(record) }]),
  );
  /** @type {Map<string, Failure>} */
  const own = new Map();
  /** @type {Map<string | undefined, { index: number, messageId: string }>} first failures */
  const failedGroups = new Map();

  /** The earlier failure of its group the message waits behind. @param {string} messageId */
  function heldBehind(messageId) {
    const at = position.get(messageId);
    const first = at?.group === undefined ? undefined : failedGroups.get(at.group);
    return first !== undefined && at !== undefined && first.index < at.index
      ? first.messageId
      : undefined;
  }

  return {
    fifo: records.some((record) => messageGroupOf(record) !== undefined),

    /** A failure never replaces poison. @param {string} messageId @param {Failure} failure */
    fail(messageId, failure) {
      if (own.get(messageId)?.kind !== 'poison') own.set(messageId, failure);
      const at = position.get(messageId);
      const first = at && failedGroups.get(at.group);
      if (at && (first === undefined || at.index < first.index))
        failedGroups.set(at.group, { index: at.index, messageId });
    },

    /** @param {string} messageId */
    hasFailed: (messageId) => own.has(messageId) || heldBehind(messageId) !== undefined,

    failures() {
      /** @type {Map<string, Failure>} */
      const all = new Map();
      for (const { messageId } of records) {
        const failure = own.get(messageId);
        const behind = failure ? undefined : heldBehind(messageId);
        if (failure) all.set(messageId, failure);
        else if (behind)
          all.set(messageId, {
            kind: 'held',
            reason: `an earlier message of its group failed (${behind})`,
          });
      }
      return all;
    },
  };
}

/** @typedef {ReturnType<typeof createFailureLedger>} FailureLedger */
