// The feeder's errors, by name (a message's failure is a value: failure-ledger.js).
export { ConfigError } from '@sluice/env';

/**
 * Thrown by the handler when every message of the batch failed because the service could not be
 * reached: Lambda then retries the whole batch later and slows its polling, instead of counting
 * the failures as partial batch failures.
 */
export class ServiceUnavailableError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'ServiceUnavailableError';
  }
}
