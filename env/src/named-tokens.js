// The one reading of named tokens (the service's INGEST_TOKENS, its file and secret; the feeder's
// secret; the rotation's versions): here because the service and the feeder both import this package.

/** A client's name, as the access log, the span and the metric label carry it: short and plain. */
const CLIENT_NAME = /^[A-Za-z0-9][\w.:@-]{0,63}$/;

/** @typedef {{ name: string, token: string }} NamedToken */

/** @param {string} problem @returns {never} */
const refuse = (problem) => {
  throw new TypeError(problem);
};

/**
 * The clients of a JSON object of client name → token, checked: a problem is a TypeError that follows
 * the variable's name and quotes names only; one token for two clients is refused (the log could not
 * tell them apart). @param {string} text @returns {NamedToken[]}
 */
export function parseNamedTokens(text) {
  /** @type {unknown} */
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    // JSON.parse's own message may quote the text: a token.
    refuse('must be a JSON object of client name → token, and is not valid JSON');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) refuse('must be a JSON object of client name → token');
  const entries = Object.entries(/** @type {Record<string, unknown>} */ (parsed));
  if (entries.length === 0) refuse('holds no client: give at least one name → token');
  /** @type {Map<string, string>} token → the name that has it */
  const owners = new Map();
  return entries.map(([name, token], position) => {
    // Not quoted: a name and its token swapped by mistake would put the token in the message.
    if (!CLIENT_NAME.test(name)) refuse(`has a client name (its entry ${position + 1}) that is not one: a name is 1 to 64 letters, digits and _ . : @ -, starting with a letter or digit`);
    if (typeof token !== 'string' || token.length === 0) refuse(`gives the client ${JSON.stringify(name)} no token: each value is a non-empty string`);
    const owner = owners.get(token);
    if (owner !== undefined) refuse(`gives the clients ${JSON.stringify(owner)} and ${JSON.stringify(name)} the same token: each client needs its own`);
    owners.set(token, name);
    return { name, token };
  });
}
