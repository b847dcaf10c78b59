import { createHash, timingSafeEqual } from 'node:crypto';

/** The client INGEST_TOKEN is: it has no name of its own. */
export const DEFAULT_CLIENT = 'default';

/** @typedef {import('@sluice/env/named-tokens').NamedToken} NamedToken */

/** @param {string} token */
const digestOf = (token) => createHash('sha256').update(token).digest();

/** @param {string} problem @returns {never} */
const refuse = (problem) => {
  throw new TypeError(problem);
};

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
