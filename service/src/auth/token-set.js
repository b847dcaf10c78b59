import { createHash, timingSafeEqual } from 'node:crypto';

/** The client of INGEST_TOKEN, which has no name of its own. */
export const DEFAULT_CLIENT = 'default';

/** @typedef {import('@sluice/env/named-tokens').NamedToken} NamedToken */
/** @typedef {import('@sluice/env/named-tokens').ClientLimits} ClientLimits */

const digestOf = (/** @type {string} */ token) => createHash('sha256').update(token).digest();

/** @param {string} problem @returns {never} */
const refuse = (problem) => {
  throw new TypeError(problem);
};

// The static bearer tokens accepted at one moment, by client: only their SHA-256 digests are kept,
// and a token is compared with every one (timingSafeEqual, no early stop), so the time taken says
// nothing about the token, its length or its client.
export class TokenSet {
  /** @param {NamedToken[]} tokens */
  constructor(tokens) {
    this.clients = tokens.map(({ name, token }) => ({ name, digest: digestOf(token) }));
    this.names = new Set(this.clients.map((c) => c.name));
    /** A client named twice (a rotation): its first. @type {Map<string, ClientLimits>} */
    this.limits = new Map();
    for (const { name, limits } of tokens)
      if (limits && !this.limits.has(name)) this.limits.set(name, limits);
    /** Who may erase; a client named twice: as its first entry says. @type {Set<string>} */
    this.erasers = new Set();
    /** @type {Set<string>} */
    const seen = new Set();
    for (const { name, erase } of tokens) {
      if (seen.has(name)) continue;
      seen.add(name);
      if (erase === true) this.erasers.add(name);
    }
  }

  /** @param {string} name */
  limitsOf(name) {
    return this.limits.get(name);
  }

  /** Whether its token was given with `"erase": true`. @param {string} name */
  mayErase(name) {
    return this.erasers.has(name);
  }

  get size() {
    return this.clients.length;
  }

  /** Its client's name. @param {string} token */
  match(token) {
    const digest = digestOf(token);
    /** @type {string | undefined} */
    let found = undefined;
    for (const client of this.clients) {
      const equal = timingSafeEqual(digest, client.digest);
      if (equal && found === undefined) found = client.name;
    }
    return found;
  }
}

// One list from several (INGEST_TOKEN and INGEST_TOKENS; a secret's two versions): a name may hold
// two tokens, a token two names never.
/** @param {NamedToken[][]} lists @returns {NamedToken[]} */
export function mergeNamedTokens(lists) {
  /** @type {Map<string, string>} */
  const owners = new Map();
  /** @type {NamedToken[]} */
  const merged = [];
  for (const named of lists.flat()) {
    const { name, token } = named;
    const owner = owners.get(token);
    if (owner === name) continue;
    if (owner !== undefined)
      refuse(
        `gives the clients ${JSON.stringify(owner)} and ${JSON.stringify(name)} the ` +
          `same token: each client needs its own`,
      );
    owners.set(token, name);
    merged.push(named);
  }
  return merged;
}
