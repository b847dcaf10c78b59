/**
 * Lambda's partial batch response: these messages return to the queue, the others are deleted.
 * @param {Iterable<string>} failedMessageIds
 */
export function toBatchItemFailures(failedMessageIds) {
  return { batchItemFailures: [...failedMessageIds].map((itemIdentifier) => ({ itemIdentifier })) };
}
