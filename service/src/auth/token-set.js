import { createHash, timingSafeEqual } from 'node:crypto';

/**
 * A client's name: what the access log, the request's span and the metric label carry. Short and
 * plain, so it is safe as a Prometheus label value and in a log line whatever tool reads it.
 */
const CLIENT_NAME = /^[A-Za-z0-9][\w.:@-]{0,63}$/;

/** The client INGEST_TOKEN is: it has no name of its own. */
export const DEFAULT_CLIENT = 'default';

/** @typedef {{ name: string, token: string }} NamedToken */

/** @param {string} token */
const digestOf = (token) => createHash('sha256').update(token).digest();

/** @param {string} problem @returns {never} */
const refuse = (problem) => {
  throw new TypeError(problem);
};

/**
 * The clients of an INGEST_TOKENS text (a JSON object of client name → token), checked: the
 * problem is a TypeError whose message follows the variable's name (the config loader's way) and
 * quotes names only, never a token. Duplicate tokens are refused: one token would be two clients,
 * and the log could not say which sent a batch.
 * @param {string} text
 * @returns {NamedToken[]}
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

/**
 * The static bearer tokens accepted at one moment, by client. A presented token is hashed and
 * compared with every client's hash, each with timingSafeEqual over equal-length SHA-256 digests,
 * without stopping at a match: the time taken says nothing about the token, its length, or which
 * client (if any) it belongs to. The tokens themselves are not kept.
 */
export class TokenSet {
  /** @param {NamedToken[]} tokens */
  constructor(tokens) {
    this.clients = tokens.map(({ name, token }) => ({ name, digest: digestOf(token) }));
    /** The names configured, for the metric label (only these are ever a label value). */
    this.names = new Set(this.clients.map((c) => c.name));
  }

  get size() {
    return this.clients.length;
  }

  /**
   * The name of the client whose token this is, or undefined.
   * @param {string} token
   */
  match(token) {
    const digest = digestOf(token);
    /** @type {string | undefined} */
    let found;
    for (const client of this.clients) {
      const equal = timingSafeEqual(digest, client.digest);
      if (equal && found === undefined) found = client.name;
    }
    return found;
  }
}

/**
 * One set from several lists (INGEST_TOKEN beside INGEST_TOKENS; a secret's current and pending
 * versions during a rotation). The same name may hold two tokens (its old and its new); the same
 * token under two names is refused, as within one list.
 * @param {NamedToken[][]} lists
 * @returns {NamedToken[]}
 */
export function mergeNamedTokens(lists) {
  /** @type {Map<string, string>} */
  const owners = new Map();
  /** @type {NamedToken[]} */
  const merged = [];
  for (const { name, token } of lists.flat()) {
    const owner = owners.get(token);
    if (owner === name) continue;
    if (owner !== undefined) refuse(`gives the clients ${JSON.stringify(owner)} and ${JSON.stringify(name)} the same token: each client needs its own`);
    owners.set(token, name);
    merged.push({ name, token });
  }
  return merged;
}
