// What of an error may be written to the log. PostgreSQL's refusals carry the row they refused:
// `detail` says "Failing row contains (email, name, phone, $2b$12$...)", `where` and a data
// exception's message quote values, and a statement's parameters are user data. A log line is read
// by more people, kept longer and shipped further than the table, so none of that goes in it:
// a database error is logged by its SQLSTATE, constraint, table and column, which is what an
// operator needs to find the rule that refused it.

// SQLSTATE classes whose messages name objects and states, never values: connection (08),
// integrity constraints (23: the constraint's name), transaction state (25), authorization (28: a
// role name), invalid catalog (3D), rollback (40), resources (53), object state (55), operator
// intervention (57), system errors (58). Other classes' messages may quote a value, e.g. 22P02
// `invalid input syntax for type integer: "..."` or 42601 `syntax error at or near "..."`.
const SAFE_MESSAGE_CLASSES = new Set(['08', '23', '25', '28', '3D', '40', '53', '55', '57', '58']);
// Fields of pg's DatabaseError that name the failing rule, never the data.
const DATABASE_FIELDS = /** @type {const} */ (['code', 'severity', 'schema', 'table', 'column', 'dataType', 'constraint', 'routine']);
const MAX_CAUSE_DEPTH = 4;

/** @param {unknown} err */
const isDatabaseError = (err) => {
  const e = /** @type {{ code?: unknown, severity?: unknown }} */ (err);
  return typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) && typeof e.severity === 'string';
};

/**
 * An error as a log line may hold it: pino's `err` serializer, also used for every `cause`.
 * @param {unknown} err
 * @param {number} [depth]
 * @returns {Record<string, unknown> | string}
 */
export function logSafeError(err, depth = 0) {
  if (!(err instanceof Error)) return isDatabaseError(err) ? databaseFields(err) : typeof err;
  /** @type {Record<string, unknown>} */
  const out = { type: err.name };
  if (isDatabaseError(err)) {
    Object.assign(out, databaseFields(err));
  } else {
    const code = /** @type {{ code?: unknown }} */ (err).code;
    if (typeof code === 'string' || typeof code === 'number') out.code = code;
    out.message = err.message;
    // A programming error's stack is what finds it; a database error's is pg's parser, and its
    // first line would repeat the message.
    out.stack = err.stack;
  }
  if (err.cause !== undefined && depth < MAX_CAUSE_DEPTH) out.cause = logSafeError(err.cause, depth + 1);
  if (err instanceof AggregateError && depth < MAX_CAUSE_DEPTH) out.errors = err.errors.slice(0, 5).map((e) => logSafeError(e, depth + 1));
  return out;
}

/** @param {any} err */
function databaseFields(err) {
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const field of DATABASE_FIELDS) if (typeof err[field] === 'string') out[field] = err[field];
  out.message = SAFE_MESSAGE_CLASSES.has(err.code.slice(0, 2)) ? err.message : `(withheld: a message of SQLSTATE class ${err.code.slice(0, 2)} may quote a value)`;
  return out;
}
