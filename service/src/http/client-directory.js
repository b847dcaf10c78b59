import { JWT_LABEL, jwtScope, tokenScope } from './authenticate.js';
import { TokenBucket } from './rate-limit.js';

// Who a request is for, as admission and the rate limit see it, from its token's limits or the
// JWT_CLIENT_ defaults; made once a client and kept, so a request allocates nothing here.

/** @typedef {import('@sluice/env/named-tokens').ClientLimits} ClientLimits */
/**
 * @typedef {import('./fair-share.js').FairClient & { name: string, bucket?: TokenBucket,
 *   limits?: ClientLimits }} Client
 */

/**
 * Subjects are the clients' own words: past it, the idle ones are forgotten at most once a
 * SWEEP_EVERY_MS, and a new subject that finds no room shares one overflow client.
 */
export const JWT_CLIENTS = 10_000;
const SWEEP_EVERY_MS = 1_000;
/** The overflow client's key: no credential's scope (tokenScope, jwtScope) starts so. */
const OVERFLOW_KEY = 'overflow:jwt';

/**
 * @param {string} key @param {string} name @param {string} label
 * @param {ClientLimits | undefined} limits @param {number} now @returns {Client}
 */
function clientOf(key, name, label, limits, now) {
  return {
    key,
    name,
    label,
    limits,
    weight: limits?.weight ?? 1,
    ...(limits?.maxInFlightBytes !== undefined
      ? { maxInFlightBytes: limits.maxInFlightBytes }
      : {}),
    ...(limits?.rate !== undefined
      ? { bucket: new TokenBucket({ rate: limits.rate, burst: limits.burst }, now) }
      : {}),
  };
}

const sameLimits = (
  /** @type {ClientLimits | undefined} */ a,
  /** @type {ClientLimits | undefined} */ b,
) => JSON.stringify(a ?? {}) === JSON.stringify(b ?? {});

export class ClientDirectory {
  /** @type {Map<string, Client>} */ #named = new Map();
  /** @type {Map<string, Client>} */ #jwt = new Map();
  /** @type {Client | undefined} */ #overflow;
  #sweptAt = -Infinity;
  /** @type {unknown} */ #set;

  /**
   * @param {{ tokens?: { current: { limitsOf: (name: string) => ClientLimits | undefined } },
   *   jwtLimits?: ClientLimits, now?: () => number }} options
   */
  constructor({ tokens, jwtLimits, now = () => performance.now() } = {}) {
    this.tokens = tokens;
    this.jwtLimits = jwtLimits;
    this.now = now;
  }

  /** A static token's client, its name its label. @param {string} name */
  named(name) {
    const set = this.tokens?.current;
    if (set !== this.#set) this.#reread(set);
    let client = this.#named.get(name);
    if (!client)
      this.#named.set(
        name,
        (client = clientOf(tokenScope(name), name, name, set?.limitsOf(name), this.now())),
      );
    return client;
  }

  /** @param {string | undefined} subject */
  jwt(subject) {
    const key = jwtScope(subject);
    let client = this.#jwt.get(key);
    if (client) return client;
    const now = this.now();
    if (this.#jwt.size >= JWT_CLIENTS) this.#forgetIdle(now);
    if (this.#jwt.size >= JWT_CLIENTS)
      return (this.#overflow ??= clientOf(OVERFLOW_KEY, JWT_LABEL, JWT_LABEL, this.jwtLimits, now));
    client = clientOf(key, subject ?? JWT_LABEL, JWT_LABEL, this.jwtLimits, now);
    this.#jwt.set(key, client);
    return client;
  }

  get jwtClients() {
    return this.#jwt.size;
  }

  /** Never one in debt. @param {number} now */
  #forgetIdle(now) {
    if (now - this.#sweptAt < SWEEP_EVERY_MS) return;
    this.#sweptAt = now;
    for (const [key, client] of this.#jwt)
      if (!client.bucket || client.bucket.idle(now)) this.#jwt.delete(key);
  }

  /** A client whose limits changed is made again, its bucket's level kept. @param {unknown} set */
  #reread(set) {
    this.#set = set;
    const current =
      /** @type {{ limitsOf: (name: string) => ClientLimits | undefined } | undefined} */ (set);
    for (const [name, old] of this.#named) {
      const limits = current?.limitsOf(name);
      if (sameLimits(old.limits, limits)) continue;
      const made = clientOf(tokenScope(name), name, name, limits, this.now());
      if (made.bucket && old.bucket)
        made.bucket.tokens = Math.min(made.bucket.burst, old.bucket.tokens);
      this.#named.set(name, made);
    }
  }
}
