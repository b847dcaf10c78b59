import { JWT_LABEL, jwtScope, tokenScope } from './authenticate.js';
import { TokenBucket } from './rate-limit.js';

// Who a request is for, as admission and the rate limit see it. Made once a client and kept, so a
// request allocates nothing here; a changed limit applies at once, the bucket's level carried over.

/** @typedef {import('@sluice/env/named-tokens').ClientLimits} ClientLimits */
/** @typedef {import('./rate-limit.js').RateBucket} RateBucket */
/**
 * @typedef {import('./fair-share.js').FairClient & { name: string, bucket?: RateBucket,
 *   limits?: ClientLimits }} Client
 */
/** @typedef {import('./rate-types.js').Buckets} Buckets */

/** @type {Buckets} */
export const LOCAL_BUCKETS = {
  make(_key, rate, now, before) {
    const bucket = new TokenBucket(rate, now);
    if (before instanceof TokenBucket) bucket.tokens = Math.min(bucket.burst, before.tokens);
    return bucket;
  },
};

/**
 * Subjects are the clients' own words: past it, the idle ones are forgotten at most once a
 * SWEEP_EVERY_MS, and a new subject that finds no room shares one overflow client.
 */
export const JWT_CLIENTS = 10_000;
const SWEEP_EVERY_MS = 1_000;
/** The overflow client's key: no credential's scope (tokenScope, jwtScope) starts so. */
const OVERFLOW_KEY = 'overflow:jwt';

/**
 * @param {{ key: string, name: string, label: string }} who
 * @param {ClientLimits | undefined} limits @param {Buckets} buckets @param {number} now
 * @param {RateBucket} [before] @returns {Client}
 */
function clientOf({ key, name, label }, limits, buckets, now, before) {
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
      ? { bucket: buckets.make(key, { rate: limits.rate, burst: limits.burst }, now, before) }
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
   *   jwtLimits?: ClientLimits, now?: () => number, buckets?: Buckets }} options
   */
  constructor({ tokens, jwtLimits, now = () => performance.now(), buckets = LOCAL_BUCKETS } = {}) {
    this.tokens = tokens;
    this.jwtLimits = jwtLimits;
    this.now = now;
    this.buckets = buckets;
  }

  /** @param {string} name */
  named(name) {
    const set = this.tokens?.current;
    if (set !== this.#set) this.#reread(set);
    let client = this.#named.get(name);
    if (!client) {
      const who = { key: tokenScope(name), name, label: name };
      client = clientOf(who, set?.limitsOf(name), this.buckets, this.now());
      this.#named.set(name, client);
    }
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
      return (this.#overflow ??= clientOf(
        { key: OVERFLOW_KEY, name: JWT_LABEL, label: JWT_LABEL },
        this.jwtLimits,
        this.buckets,
        now,
      ));
    const who = { key, name: subject ?? JWT_LABEL, label: JWT_LABEL };
    client = clientOf(who, this.jwtLimits, this.buckets, now);
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

  /** @param {unknown} set */
  #reread(set) {
    this.#set = set;
    const current =
      /** @type {{ limitsOf: (name: string) => ClientLimits | undefined } | undefined} */ (set);
    for (const [name, old] of this.#named) {
      const limits = current?.limitsOf(name);
      if (sameLimits(old.limits, limits)) continue;
      const who = { key: tokenScope(name), name, label: name };
      this.#named.set(name, clientOf(who, limits, this.buckets, this.now(), old.bucket));
    }
  }
}
