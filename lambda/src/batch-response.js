/**
 * The partial batch response Lambda's SQS event source understands: only these messages return to
 * the queue; every other message of the batch is deleted.
 * @param {Iterable<string>} failedMessageIds
 * @returns {{ batchItemFailures: { itemIdentifier: string }[] }}
 */
export function toBatchItemFailures(failedMessageIds) {
  return { batchItemFailures: [...failedMessageIds].map((itemIdentifier) => ({ itemIdentifier })) };
}
