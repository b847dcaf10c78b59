export { ConfigError } from '@sluice/env';

/** Every message failed for an outage: Lambda retries the batch later and slows its polling. */
export class ServiceUnavailableError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'ServiceUnavailableError';
  }
}
