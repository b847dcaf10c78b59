// Every refusal and failure the API can answer, declared once: the error handler, the HTTP server's
// own refusals and the OpenAPI document read it, so no answer goes undescribed. Column names come
// from user-columns.js.
import { errorCode } from './error-code.js';
import { KEY_COLUMN, READ_FIELDS, SECRET_FIELDS, USER_FIELDS } from './user-columns.js';

export const inCode = (/** @type {readonly string[]} */ names) =>
  names.map((n) => `\`${n}\``).join(', ');
/** `` `a`, `b` and `c` `` */
export const inCodeSentence = (/** @type {readonly string[]} */ names) =>
  names.length < 2 ? inCode(names) : `${inCode(names.slice(0, -1))} and \`${names.at(-1)}\``;
const KEY = KEY_COLUMN.field;

// `pgrst`: the body's `code` (PostgREST's own for the same refusal, else PostgreSQL's SQLSTATE);
// `message`: the usual one (a case may say more); `when`: the OpenAPI description; `scope`: POST
// /users (and the erasures), any route, unrouted, or the erasures only.
/** @typedef {'users' | 'any' | 'unrouted' | 'erase'} ErrorScope */
/**
 * @typedef {{ status: number, pgrst: string, hint?: string, message: string, when: string,
 *   headers?: Record<string, string>, scope: ErrorScope }} ApiErrorSpec
 */

export const API_ERRORS = /** @type {const} */ ({
  invalid_batch: {
    status: 400,
    pgrst: '23514',
    scope: 'users',
    message: 'some users are invalid; nothing was written',
    when:
      'Users that break the rules, each named by index and field in `errors` (at most 100, ' +
      'in index order; in a streamed body, by `line` too). With `Prefer: ' +
      'invalid=quarantine`, only when more items are invalid than its bound (`max-invalid`, ' +
      '100 by default), or when the quarantine of its client would hold more than ' +
      '`QUARANTINE_CLIENT_MAX_BYTES`: then nothing is written and nothing set aside.',
  },
  not_an_array: {
    status: 400,
    pgrst: 'PGRST102',
    scope: 'users',
    message: 'the body must be a JSON array of users',
    when: 'The body is JSON, but not an array.',
  },
  empty_batch: {
    status: 400,
    pgrst: 'PGRST102',
    scope: 'users',
    message: 'the array is empty: send at least one user',
    when: 'An empty array.',
  },
  malformed_json: {
    status: 400,
    pgrst: 'PGRST102',
    scope: 'users',
    message: 'the body is not valid JSON',
    when: 'The body is not JSON, or a line of an NDJSON body is not (named by its line).',
  },
  malformed_csv: {
    status: 400,
    pgrst: 'PGRST102',
    scope: 'users',
    message: 'the body is not valid CSV; nothing was written',
    when:
      'A `text/csv` body whose header row or a record ' +
      'is malformed (RFC 4180), named by its line.',
  },
  invalid_utf8: {
    status: 400,
    pgrst: 'PGRST102',
    scope: 'users',
    message: 'the body is not valid UTF-8; nothing was written',
    when: 'The body holds bytes that are not UTF-8.',
  },
  duplicate_key: {
    status: 400,
    pgrst: 'PGRST102',
    scope: 'users',
    message: 'a key is given more than once in one object; send each key once',
    when: 'One object gives a key twice (outside a user; inside one, it is `invalid_batch`).',
  },
  duplicate_header: {
    status: 400,
    pgrst: 'PGRST100',
    scope: 'users',
    message: 'a header is given more than once; send it once',
    when: '`Content-Type` or `Authorization` given twice.',
  },
  malformed_encoding: {
    status: 400,
    pgrst: 'PGRST102',
    scope: 'users',
    message: 'the body is not valid data for its Content-Encoding; nothing was written',
    when: 'The body does not decode as its `Content-Encoding` says.',
  },
  unknown_column: {
    status: 400,
    pgrst: 'PGRST204',
    scope: 'users',
    message: 'a column named in the query is not a column of users',
    when:
      `\`?columns\`, \`?on_conflict\` or \`?select\` names a column users does ` +
      `not have (${inCode(USER_FIELDS)}; in \`select\`, one a representation ` +
      `does not hold: ${inCode(READ_FIELDS)}, never ${inCode(SECRET_FIELDS)}).`,
  },
  unsupported_conflict_target: {
    status: 400,
    pgrst: '42P10',
    scope: 'users',
    message: `on_conflict must be ${KEY}, the only unique column of users`,
    hint: `send on_conflict=${KEY}, or leave it out`,
    when: `\`?on_conflict\` names a column of users that is not unique (only \`${KEY}\` is).`,
  },
  unsupported_query: {
    status: 400,
    pgrst: 'PGRST100',
    scope: 'users',
    message: 'a query parameter cannot be read',
    when:
      '`?select` asks for more than a list of columns (embedding, renaming, casts, ' +
      'JSON paths), or a query parameter sluice reads is empty or given twice.',
  },
  unsupported_preference: {
    status: 400,
    pgrst: 'PGRST122',
    scope: 'users',
    message: 'Prefer: resolution must be merge-duplicates or ignore-duplicates',
    when:
      'A `Prefer` header asks for a `resolution` other than `merge-duplicates` or ' +
      '`ignore-duplicates`, or for two that differ; an `invalid` other than ' +
      '`quarantine`, or a `max-invalid` that is not a whole number from 0 to 10000.',
  },
  malformed_idempotency_key: {
    status: 400,
    pgrst: 'PGRST100',
    scope: 'users',
    message:
      'Idempotency-Key must be one Structured Field string of 1 to 255 visible ' +
      'ASCII characters, such as "8e03978e-40d5-43e8-bc93-6894a57f9324"',
    when:
      'An `Idempotency-Key` header that is not one quoted ' +
      'string (RFC 8941) of 1 to 255 characters, or given twice.',
  },
  bad_request: {
    status: 400,
    pgrst: 'PGRST100',
    scope: 'any',
    message: 'the request is not valid HTTP/1.1; nothing was read or written',
    when:
      'A request that is not valid HTTP/1.1: a malformed request line ' +
      'or header, both `Content-Length` and `Transfer-Encoding`, or a ' +
      'body that does not match its `Content-Length`.',
  },
  // Every 401 is `unauthorized`; WWW-Authenticate tells its cases apart (RFC 6750 3.1:
  // UnauthorizedError).
  unauthorized: {
    status: 401,
    pgrst: 'PGRST301',
    scope: 'users',
    message: 'missing or wrong bearer token',
    when:
      'Only when a token or a JWT is required (INGEST_TOKEN, INGEST_TOKENS, JWT_SECRET or ' +
      'JWT_JWKS_URL set): no `Authorization` header (`WWW-Authenticate: Bearer`); one of ' +
      'another scheme, or `Bearer` with no token (`Bearer error="invalid_request"`); or a ' +
      'token that is not valid (`Bearer error="invalid_token"`): a token no client has, ' +
      'or a JWT that does not verify (expired or not valid yet, for another audience or ' +
      'issuer, a wrong signature, an algorithm not accepted, a kid the key set does not ' +
      'have or a key set that cannot be fetched within JWT_JWKS_TIMEOUT_MS, a role claim ' +
      'that does not grant writing). The message says which, and names no secret.',
    headers: { 'WWW-Authenticate': 'Bearer' },
  },
  // PostgREST answers an authenticated role without the privilege so (401 is for no role at all).
  forbidden: {
    status: 403,
    pgrst: '42501',
    scope: 'erase',
    message: "this client's credentials do not grant erasing; nothing was erased",
    when:
      'Only when a token or a JWT is required: a client whose credentials grant writing ' +
      'but not erasing (a token of INGEST_TOKENS without `"erase": true`, a JWT whose ' +
      'role claim is not one of JWT_ERASE_ROLES). Nothing was erased; the message names ' +
      'the client.',
  },
  not_found: {
    status: 404,
    pgrst: 'PGRST125',
    scope: 'unrouted',
    message: 'no route for this method and path',
    when: 'A method and path this API does not serve.',
  },
  method_not_allowed: {
    status: 405,
    pgrst: 'PGRST117',
    scope: 'unrouted',
    message: 'this method is not served on this path',
    when:
      'A method a path does not serve (`/users` serves POST and DELETE, `/erasures` ' +
      "POST); the answer's `Allow` names the methods it serves.",
  },
  idempotency_key_in_flight: {
    status: 409,
    pgrst: '55006',
    scope: 'users',
    message:
      'a request with this Idempotency-Key is still being written; nothing was ' +
      'written by this one: retry later with the same key to get its answer',
    when:
      'Another request with the same `Idempotency-Key` (of the same client) was ' +
      'still in flight after this one waited DB_LOCK_TIMEOUT_MS for it (a small ' +
      'request, written in a group, waits less). Nothing was written by this ' +
      'one; a retry with the same key gets the first answer once it is done.',
    headers: { 'Retry-After': '1' },
  },
  body_timeout: {
    status: 408,
    pgrst: 'PGRST102',
    scope: 'users',
    message: 'the body did not arrive within BODY_READ_TIMEOUT_MS; nothing was written',
    when: 'The body did not arrive in full within BODY_READ_TIMEOUT_MS.',
  },
  request_timeout: {
    status: 408,
    pgrst: 'PGRST100',
    scope: 'any',
    message: 'the request did not arrive in time; nothing was read or written',
    when: 'The request line and headers did not arrive in time.',
  },
  idempotency_key_reused: {
    status: 422,
    pgrst: '23505',
    scope: 'users',
    message:
      'this Idempotency-Key was used for another request; ' +
      'nothing was written: send a new key for a new request',
    when:
      'The `Idempotency-Key` (of the same client, within IDEMPOTENCY_KEY_TTL_SECONDS) ' +
      'was used with another body, content type, `Prefer` or query. Nothing was written.',
  },
  too_many_items: {
    status: 413,
    pgrst: 'PGRST102',
    scope: 'users',
    message: 'more users than MAX_BATCH_ITEMS; split the batch',
    when: 'More users than MAX_BATCH_ITEMS.',
  },
  payload_too_large: {
    status: 413,
    pgrst: 'PGRST102',
    scope: 'users',
    message: 'the body (decompressed) is larger than MAX_BODY_BYTES; nothing was written',
    when: 'A body over MAX_BODY_BYTES (decoded).',
  },
  unsupported_media_type: {
    status: 415,
    pgrst: 'PGRST107',
    scope: 'users',
    message: 'Content-Type must be application/json',
    when:
      'Not `application/json`, `application/x-ndjson`, ' +
      '`application/jsonl` or `text/csv`, or a malformed `Content-Type`.',
  },
  unsupported_charset: {
    status: 415,
    pgrst: 'PGRST107',
    scope: 'users',
    message: 'the body must be UTF-8 (send charset=utf-8 or no charset)',
    when: 'A charset other than UTF-8.',
  },
  unsupported_encoding: {
    status: 415,
    pgrst: 'PGRST107',
    scope: 'users',
    message: 'Content-Encoding must be one of gzip, deflate, br, zstd, or none',
    when: 'A `Content-Encoding` other than gzip, deflate, br or zstd, or several.',
  },
  expectation_failed: {
    status: 417,
    pgrst: 'PGRST100',
    scope: 'any',
    message: 'only Expect: 100-continue is supported',
    when: 'An `Expect` header other than `100-continue`.',
  },
  rate_limited: {
    status: 429,
    pgrst: '53400',
    scope: 'users',
    message: 'this client is over its rate; nothing was read or written, retry after Retry-After',
    when:
      'The client is over the rate in users a second declared with its ' +
      "credentials (INGEST_TOKENS, or JWT_CLIENT_RATE for a JWT's client); " +
      'refused before the body is read. `Retry-After` says when the request would ' +
      'be taken; `RateLimit-Policy` and `RateLimit` (IETF httpapi RateLimit ' +
      'header fields) give the quota in users, the users left and the seconds ' +
      'until it is full again. The message names the client and its limit.',
    headers: {
      'Retry-After': '1',
      'RateLimit-Policy': '"users";q=1000;w=1',
      RateLimit: '"users";r=0;t=1',
    },
  },
  headers_too_large: {
    status: 431,
    pgrst: 'PGRST100',
    scope: 'any',
    message: 'the request headers are too large; nothing was read or written',
    when: "Request headers over Node.js's limit (16 KiB).",
  },
  internal: {
    status: 500,
    pgrst: 'PGRSTX00',
    scope: 'any',
    message: 'unexpected error; nothing was written',
    when:
      'An unexpected failure of this request alone (retrying ' +
      'will not help); its `errorId` is in the log too.',
  },
  statement_pooling: {
    status: 500,
    pgrst: '08P01',
    scope: 'users',
    message:
      'the database is behind a pooler in pool_mode = statement, ' +
      'which cannot hold a transaction; nothing was written, and ' +
      'retrying will not help until it runs pool_mode = transaction',
    when:
      'DATABASE_URL points at a pooler (PgBouncer) in statement mode, which refuses ' +
      'the transaction a batch over INSERT_CHUNK_ROWS or a streamed import needs: an ' +
      'operator must set `pool_mode = transaction`. `/readyz` answers 503 meanwhile.',
  },
  unsupported_transfer_encoding: {
    status: 501,
    pgrst: 'PGRST127',
    scope: 'users',
    message: 'Transfer-Encoding must be chunked alone (compress with Content-Encoding)',
    when: 'A transfer coding other than chunked (RFC 9112, 6.1).',
  },
  overloaded: {
    status: 503,
    pgrst: 'PGRST003',
    scope: 'users',
    message: 'the service is at its in-flight work limit; nothing was read or written, retry later',
    when: 'The in-flight work budget is full; refused before the body is read.',
    headers: { 'Retry-After': '1' },
  },
  lock_timeout: {
    status: 503,
    pgrst: '55P03',
    scope: 'users',
    message:
      'a row this request writes is held by another writer; nothing was written, retry later',
    when:
      'A row this request writes stayed locked by another writer for DB_LOCK_TIMEOUT_MS ' +
      "(PostgreSQL's lock_timeout). Requests for other emails are not held back.",
    headers: { 'Retry-After': '1' },
  },
  statement_timeout: {
    status: 503,
    pgrst: '57014',
    scope: 'users',
    message:
      'the database did not finish the write within ' +
      'DB_STATEMENT_TIMEOUT_MS; nothing was written, retry later',
    when:
      'The write ran longer than DB_STATEMENT_TIMEOUT_MS (a database under load ' +
      "or a whole-table lock): the database's state, not the request's fault.",
    headers: { 'Retry-After': '2' },
  },
  database_unavailable: {
    status: 503,
    pgrst: 'PGRST000',
    scope: 'users',
    message: 'the database cannot take writes now; nothing was written, retry later',
    when: 'PostgreSQL is unreachable, or every pooled connection is busy.',
    headers: { 'Retry-After': '2' },
  },
  missing_filter: {
    status: 400,
    pgrst: '21000',
    scope: 'erase',
    message: 'DELETE requires a WHERE clause: filter by email (?email=eq.X or ?email=in.(X,Y))',
    when: 'A `DELETE /users` without a filter: nothing is erased.',
  },
  unsupported_filter: {
    status: 400,
    pgrst: 'PGRST100',
    scope: 'erase',
    message: '"failed to parse filter": only email=eq.X and email=in.(X,Y) are served',
    when:
      'A `DELETE /users` filter on another column, with another operator, given twice, or ' +
      'naming an email that is not a plausible address: nothing is erased.',
  },
  erasure_during_import: {
    status: 503,
    pgrst: 'PGRST000',
    scope: 'users',
    message: 'an erasure was made while this import ran; nothing was written: send it again',
    when:
      'A streamed import during whose body an erasure was made (it reads the erasures made ' +
      'before it starts, and finds a later one at its end): it is refused whole, and the same ' +
      'import sent again leaves the erased emails out.',
    headers: { 'Retry-After': '1' },
  },
  erasure_key_missing: {
    status: 503,
    pgrst: 'PGRST000',
    scope: 'users',
    message:
      'this process has no ERASURE_KEY: it cannot erase, nor write once an email was erased ' +
      '(it cannot tell which); nothing was written',
    when:
      'An erasure asked of a process without `ERASURE_KEY` (or `ERASURE_KEY_FILE`), or any ' +
      'write reaching one once an erasure was made (it cannot tell an erased email from ' +
      'another): every process must be given the same key.',
    headers: { 'Retry-After': '2' },
  },
  outcome_unknown: {
    status: 503,
    pgrst: '08007',
    scope: 'users',
    message:
      'the connection to the database was lost after the write was sent: it may ' +
      'have been written; retrying is safe (writes are idempotent): retry with ' +
      'the same Idempotency-Key to get the answer of the write if it was committed',
    when:
      'The connection to PostgreSQL was lost (a crash, a pause, a cut network) after ' +
      "the write's commit was sent and before its answer came: the write may or may " +
      'not have been committed. Sending the same request again is safe: an email ' +
      'already stored is not written twice; sent with the same `Idempotency-Key`, it ' +
      'gets the first answer if that write was committed, else it writes.',
    headers: { 'Retry-After': '2' },
  },
});

/** @typedef {keyof typeof API_ERRORS} ApiErrorCode */

/** @param {number} maxBatchItems */
export const emptyBatchMessage = (maxBatchItems) =>
  `the array is empty: send 1 to ${maxBatchItems} users`;

/**
 * One item's problem; `line`: where it starts in a streamed body, from 1.
 * @typedef {{ index: number, field: string | null, message: string, line?: number }} ItemError
 */

/** The item errors as PostgREST's `details`, one line of text. @param {ItemError[]} errors */
export const itemErrorsAsDetails = (errors) =>
  errors.map((e) => `[${e.index}]${e.field === null ? '' : `.${e.field}`} ${e.message}`).join('; ');

/**
 * An answer from the catalogue: its status and headers come from there, its message may be its own.
 */
export class ApiError extends Error {
  /**
   * @param {ApiErrorCode} code
   * @param {string} [message]
   * @param {{ cause?: unknown, details?: string }} [options]
   */
  constructor(code, message = API_ERRORS[code].message, { cause, details } = {}) {
    super(message, { cause });
    this.name = 'ApiError';
    this.code = code;
    this.status = API_ERRORS[code].status;
    this.details = details;
  }
}

export class InvalidBatchError extends ApiError {
  /** @param {string} message @param {ItemError[]} errors */
  constructor(message, errors) {
    super('invalid_batch', message);
    this.name = 'InvalidBatchError';
    this.errors = errors;
  }
}

/** RFC 6750's challenge (3.1) for each kind of refused credential. */
export const BEARER_CHALLENGES = Object.freeze({
  missing: 'Bearer',
  malformed: 'Bearer error="invalid_request"',
  invalid: 'Bearer error="invalid_token"',
});

/** A 401: `unauthorized`, its WWW-Authenticate saying which kind of credential was refused. */
export class UnauthorizedError extends ApiError {
  /** @param {keyof typeof BEARER_CHALLENGES} kind @param {string} [message] */
  constructor(
    kind,
    message = kind === 'missing'
      ? 'no credentials: send Authorization: Bearer and a token'
      : kind === 'malformed'
        ? 'the Authorization header must be Bearer and a token'
        : 'the bearer token is not valid',
  ) {
    super('unauthorized', message);
    this.name = 'UnauthorizedError';
    this.headers = { 'WWW-Authenticate': BEARER_CHALLENGES[kind] };
  }
}

/**
 * A client over its rate (http/rate-limit.js): 429, Retry-After and the RateLimit fields its own.
 */
export class RateLimitedError extends ApiError {
  /**
   * @param {string} client its name
   * @param {{ rate: number, burst: number, policy: string }} bucket
   * @param {number} retryAfterSeconds
   * @param {string} state the RateLimit field
   */
  constructor(client, bucket, retryAfterSeconds, state) {
    super(
      'rate_limited',
      `the client ${JSON.stringify(client)} is over its rate ` +
        `of ${bucket.rate} users a second (burst ${bucket.burst}); ` +
        `nothing was read or written: retry after ${retryAfterSeconds} s`,
    );
    this.name = 'RateLimitedError';
    this.headers = {
      'Retry-After': String(retryAfterSeconds),
      'RateLimit-Policy': bucket.policy,
      RateLimit: state,
    };
  }
}

/** A client whose credentials do not grant erasing (http/require-erase.js): 403, nothing erased. */
export class ForbiddenError extends ApiError {
  /** @param {string | undefined} client its name */
  constructor(client) {
    super(
      'forbidden',
      `${client === undefined ? 'this client' : `the client ${JSON.stringify(client)}`} ` +
        'may not erase: its credentials do not grant it; nothing was erased',
    );
    this.name = 'ForbiddenError';
  }
}

/** The database is unreachable, or every pooled connection busy: retry later. */
export class DatabaseUnavailableError extends ApiError {
  /** @param {unknown} [cause] */
  constructor(cause) {
    super('database_unavailable', undefined, { cause });
    this.name = 'DatabaseUnavailableError';
  }
}

/** The database's lock or statement timeout ended the write: its state, not the request's fault. */
export class DatabaseTimeoutError extends ApiError {
  /** @param {'lock_timeout' | 'statement_timeout'} code @param {unknown} [cause] */
  constructor(code, cause) {
    super(code, undefined, { cause });
    this.name = 'DatabaseTimeoutError';
  }
}

/**
 * The write's commit was sent and no answer came: it may have been written; a replay stores nothing
 * twice.
 */
export class OutcomeUnknownError extends ApiError {
  /** @param {unknown} [cause] */
  constructor(cause) {
    super('outcome_unknown', undefined, { cause });
    this.name = 'OutcomeUnknownError';
  }
}

/**
 * What the lending of a connection saw when a failure came (db/lending.js): whether a commit had
 * gone out (a COMMIT, or a statement outside BEGIN); whether it failed BEGIN's round trip (no
 * transaction opened); whether the socket was gone, the statement unanswered its read timeout, or
 * the connection had failed first with another error; whether the statement timeout in force had
 * run out.
 * @typedef {{ commitSent: boolean, atBegin: boolean, socketClosed: boolean, unanswered: boolean,
 *   afterConnectionError: boolean, pastStatementTimeout: boolean }} ConnectionState
 */

/** @type {Readonly<ConnectionState>} the state of a failure no lending saw */
export const NOTHING_SEEN = Object.freeze({
  commitSent: false,
  atBegin: false,
  socketClosed: false,
  unanswered: false,
  afterConnectionError: false,
  pastStatementTimeout: false,
});

/**
 * Not an answer: a failure of the database's as its connection's lending saw it, `cause` as pg gave
 * it and `code` its SQLSTATE or errno. db/failure.js tells what it means; a log shows the cause.
 */
export class DatabaseFailure extends Error {
  /** @param {unknown} cause @param {Partial<ConnectionState>} [state] */
  constructor(cause, state = {}) {
    super('the database failed', { cause });
    this.name = 'DatabaseFailure';
    this.code = errorCode(cause);
    /** @type {Readonly<ConnectionState>} */
    this.state = Object.freeze({ ...NOTHING_SEEN, ...state });
  }
}

// Bad configuration: the one class for the service and its migrations (db/src/config-error.js).
export { ConfigError } from '@sluice/env';
