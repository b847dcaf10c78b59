// Every error the service raises on purpose. The one error handler (http/error-handler.js) maps
// them to status codes; anything else is a 500 with an error id.

export class ConfigError extends Error {
  /** @param {string} variable @param {string} problem */
  constructor(variable, problem) {
    super(`${variable} ${problem}`);
    this.name = 'ConfigError';
    this.variable = variable;
  }
}

/** A request the client can fix: the status and a machine-readable code go back as they are. */
export class HttpError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   * @param {Record<string, string>} [headers]
   */
  constructor(status, code, message, headers = {}) {
    super(message);
    this.name = 'HttpError';
    this.status = status;
    this.code = code;
    this.headers = headers;
  }
}

/**
 * @typedef {{ index: number, field: string | null, message: string }} ItemError
 */

export class InvalidBatchError extends HttpError {
  /** @param {string} message @param {ItemError[]} errors */
  constructor(message, errors) {
    super(400, 'invalid_batch', message);
    this.name = 'InvalidBatchError';
    this.errors = errors;
  }
}

/** The database cannot take the request now (down, or every pooled connection busy): retry later. */
export class DatabaseUnavailableError extends Error {
  /** @param {string} message @param {unknown} [cause] */
  constructor(message, cause) {
    super(message, { cause });
    this.name = 'DatabaseUnavailableError';
  }
}
