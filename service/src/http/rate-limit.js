import { RateLimitedError } from '../errors.js';

// A request is charged from its Content-Length before its body is read, settled to its users once
// answered; a refusal is charged what was read, so a body without a length pays for its reading.

/** A user's JSON before the body is read: its real count settles the charge. */
export const ESTIMATED_USER_BYTES = 100;
const POLICY = '"users"';

/** @typedef {import('./rate-types.js').Rate} Rate */
/** @typedef {import('./rate-types.js').RateBucket} RateBucket */

/** The burst over the seconds it takes to fill. @param {{ rate: number, burst: number }} limit */
export const policyOf = ({ rate, burst }) =>
  `${POLICY};q=${Math.round(burst)};w=${Math.max(1, Math.ceil(burst / rate))}`;

/** @param {number} remaining @param {number} secondsToFull */
export const stateOf = (remaining, secondsToFull) =>
  `${POLICY};r=${Math.max(0, Math.floor(remaining))};t=${Math.ceil(secondsToFull)}`;

export class TokenBucket {
  /** @param {Rate} limit @param {number} now  ms (performance.now) */
  constructor({ rate, burst = rate }, now) {
    this.rate = rate;
    this.burst = burst;
    this.tokens = burst;
    this.updated = now;
    this.pending = 0;
    this.policy = policyOf({ rate, burst });
  }

  /** @param {number} now */
  #refill(now) {
    if (now > this.updated)
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.updated) / 1000) * this.rate);
    this.updated = now;
  }

  /** @param {{ rate: number, burst: number }} limit @param {number} now @param {number} [level] */
  resize({ rate, burst }, now, level) {
    this.#refill(now);
    this.rate = rate;
    this.burst = burst;
    this.tokens = Math.min(burst, level ?? this.tokens);
    this.policy = policyOf({ rate, burst });
  }

  /** Below 0: owed. @param {number} now */
  level(now) {
    this.#refill(now);
    return this.tokens;
  }

  /** More than the burst goes into debt once full. @param {number} users @param {number} now */
  take(users, now) {
    this.#refill(now);
    const needed = Math.max(1, Math.min(users, this.burst));
    if (this.tokens >= needed) {
      this.tokens -= users;
      return 0;
    }
    return (needed - this.tokens) / this.rate;
  }

  /** @param {number} users */
  settle(users) {
    this.tokens = Math.min(this.burst, this.tokens - users);
  }

  /** Whether forgetting the bucket forgives nothing. @param {number} now */
  idle(now) {
    this.#refill(now);
    return this.pending === 0 && this.tokens >= this.burst;
  }

  /** @param {number} now */
  state(now) {
    this.#refill(now);
    return stateOf(this.tokens, (this.burst - Math.min(this.burst, this.tokens)) / this.rate);
  }
}

/** @param {import('node:http').IncomingMessage} req */
export function estimatedUsers(req) {
  const length = Number(req.headers['content-length']);
  return Number.isSafeInteger(length) && length > 0
    ? Math.max(1, Math.floor(length / ESTIMATED_USER_BYTES))
    : 1;
}

/** A body read (in part), in users. @param {import('express').Response['locals']} locals */
export function usersRead({ bodyBytes = 0, bodyUsers = 0 }) {
  return Math.max(bodyUsers, Math.ceil(bodyBytes / ESTIMATED_USER_BYTES));
}

/** A refusal once the body was read: charged that. @param {import('express').Response} res */
export function chargeRefused(res) {
  const settle = res.locals.settleUsers;
  if (settle) settle(usersRead(res.locals), true);
}

/**
 * answer.js settles the charge through res.locals.settleUsers, chargeRefused a refusal's.
 * @param {{ refused: (label: string) => void, now?: () => number }} deps
 * @returns {import('express').RequestHandler}
 */
export function limitRate({ refused, now = () => performance.now() }) {
  /**
   * @param {import('express').Response} res @param {import('express').NextFunction} next
   * @param {import('./client-directory.js').Client} client @param {RateBucket} bucket
   * @param {number} charged
   */
  function charge(res, next, client, bucket, charged) {
    const at = now();
    const waitSeconds = bucket.take(charged, at);
    if (waitSeconds > 0) {
      refused(client.label);
      return next(
        new RateLimitedError(
          client.name,
          bucket,
          Math.max(1, Math.ceil(waitSeconds)),
          bucket.state(at),
        ),
      );
    }
    res.setHeader('RateLimit-Policy', bucket.policy);
    res.setHeader('RateLimit', bucket.state(at));
    res.locals.settleUsers = (users, refused = false) => {
      res.locals.settleUsers = undefined;
      bucket.settle(refused ? Math.max(0, users - charged) : users - charged);
    };
    bucket.pending++;
    res.once('close', () => bucket.pending--);
    next();
  }
  return (req, res, next) => {
    const client = req.ingestClient;
    const bucket = client?.bucket;
    if (!client || !bucket) return next();
    const charged = estimatedUsers(req);
    // Briefly: a lease falls back to a local share rather than keep a charge waiting.
    const leasing = bucket.wait?.(charged);
    if (leasing) return leasing.then(() => charge(res, next, client, bucket, charged));
    charge(res, next, client, bucket, charged);
  };
}
