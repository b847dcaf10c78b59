// The feeder's failures, by name. Each tells the handler whether retrying later can help.

// A variable missing or wrong: the one class of every loader (env/, bundled with the handler).
export { ConfigError } from '@sluice/env';

/** A message that can never be stored as it is: bad JSON, or a user the service refuses. */
export class PoisonMessageError extends Error {
  /** @param {string} reason */
  constructor(reason) {
    super(reason);
    this.name = 'PoisonMessageError';
  }
}

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
