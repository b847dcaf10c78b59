// What of an error may be written to the log. PostgreSQL's refusals quote the row they refused
// (`detail`, `where`, a data exception's message), and a log line travels further than the table:
// a database error is logged by its SQLSTATE, constraint, table and column, never its values.
import { frozenWords } from '@sluice/env';
import { DatabaseFailure } from './errors.js';

// SQLSTATE classes whose messages name objects and states, never values (22P02 or 42601 quote one).
const SAFE_MESSAGE_CLASSES = new Set(['08', '23', '25', '28', '3D', '40', '53', '55', '57', '58']);
const DATABASE_FIELDS = frozenWords([
  'code',
  'severity',
  'schema',
  'table',
  'column',
  'dataType',
  'constraint',
  'routine',
]);
const MAX_CAUSE_DEPTH = 4;

const isDatabaseError = (/** @type {unknown} */ err) => {
  const e = /** @type {{ code?: unknown, severity?: unknown }} */ (err);
  return (
    typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) && typeof e.severity === 'string'
  );
};

/**
 * An error as a log line may hold it: pino's `err` serializer, and every `cause`'s.
 * @param {unknown} err
 * @param {number} [depth]
 * @returns {Record<string, unknown> | string}
 */
export function logSafeError(err, depth = 0) {
  // What the connection's lending saw is for db/failure.js: the line shows what failed.
  if (err instanceof DatabaseFailure) return logSafeError(err.cause, depth);
  if (!(err instanceof Error)) return isDatabaseError(err) ? databaseFields(err) : typeof err;
  /** @type {Record<string, unknown>} */
  const out = { type: err.name };
  if (isDatabaseError(err)) {
    Object.assign(out, databaseFields(err));
  } else {
    const code = /** @type {{ code?: unknown }} */ (err).code;
    if (typeof code === 'string' || typeof code === 'number') out.code = code;
    out.message = err.message;
    out.stack = err.stack;
  }
  if (err.cause !== undefined && depth < MAX_CAUSE_DEPTH)
    out.cause = logSafeError(err.cause, depth + 1);
  if (err instanceof AggregateError && depth < MAX_CAUSE_DEPTH)
    out.errors = err.errors.slice(0, 5).map((e) => logSafeError(e, depth + 1));
  return out;
}

/** @param {any} err */
function databaseFields(err) {
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const field of DATABASE_FIELDS) if (typeof err[field] === 'string') out[field] = err[field];
  out.message = SAFE_MESSAGE_CLASSES.has(err.code.slice(0, 2))
    ? err.message
    : `(withheld: a message of SQLSTATE class ${err.code.slice(0, 2)} may quote a value)`;
  return out;
}
