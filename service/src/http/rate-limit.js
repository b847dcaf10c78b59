import { RateLimitedError } from '../errors.js';

// A client's rate in users a second, with a burst (a token bucket, as Loki's ingestion_rate and
// ingestion_burst_size): a request is charged before its body is read, from its Content-Length
// (ESTIMATED_USER_BYTES a user), and settled to the users it held once answered; a refusal after
// its body was read (in part) is charged what was read, if that is more, so a body without a length
// pays for its reading and checking whether it is written or not. Over the rate, 429 with
// Retry-After and the IETF httpapi RateLimit headers, nothing read or written.

/**
 * Bytes of JSON a user is taken to be before the body is read: its real count settles the charge.
 */
export const ESTIMATED_USER_BYTES = 100;
/** The RateLimit-Policy's name: the quota is of users. */
const POLICY = '"users"';

/** @typedef {{ rate: number, burst?: number }} Rate */
/**
 * What limitRate charges: a process's own TokenBucket, or its share of a rate held for the
 * deployment (http/shared-rate.js), whose `wait` is told of every request first and answers a
 * promise while the share is being leased. rate, burst and policy are the client's declared ones.
 * @typedef {{ rate: number, burst: number, policy: string, pending: number,
 *   wait?: (users: number) => Promise<void> | undefined,
 *   take: (users: number, now: number) => number, settle: (users: number) => void,
 *   idle: (now: number) => boolean, state: (now: number) => string }} RateBucket
 */

/**
 * The RateLimit-Policy field of a rate: the burst over the seconds it takes to fill.
 * @param {{ rate: number, burst: number }} limit
 */
export const policyOf = ({ rate, burst }) =>
  `${POLICY};q=${Math.round(burst)};w=${Math.max(1, Math.ceil(burst / rate))}`;

/**
 * The RateLimit field: users left now and seconds until the bucket is full.
 * @param {number} remaining @param {number} secondsToFull
 */
export const stateOf = (remaining, secondsToFull) =>
  `${POLICY};r=${Math.max(0, Math.floor(remaining))};t=${Math.ceil(secondsToFull)}`;

export class TokenBucket {
  /** @param {Rate} limit @param {number} now  ms (performance.now) */
  constructor({ rate, burst = rate }, now) {
    this.rate = rate;
    this.burst = burst;
    this.tokens = burst;
    this.updated = now;
    /** Requests charged whose answer is not done: each may yet settle for more users. */
    this.pending = 0;
    this.policy = policyOf({ rate, burst });
  }

  /** @param {number} now */
  #refill(now) {
    if (now > this.updated)
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.updated) / 1000) * this.rate);
    this.updated = now;
  }

  /**
   * Another rate and burst from now on: what was filled until now at the old rate kept, never above
   * the new burst; `level`, when given, in its place (at most the new burst).
   * @param {{ rate: number, burst: number }} limit @param {number} now @param {number} [level]
   */
  resize({ rate, burst }, now, level) {
    this.#refill(now);
    this.rate = rate;
    this.burst = burst;
    this.tokens = Math.min(burst, level ?? this.tokens);
    this.policy = policyOf({ rate, burst });
  }

  /** Users in the bucket now (below 0: owed). @param {number} now */
  level(now) {
    this.#refill(now);
    return this.tokens;
  }

  /**
   * Takes `users` (a request larger than the burst once the bucket holds the burst, into debt),
   * answering 0, or the seconds until it could be taken (nothing taken).
   * @param {number} users
   * @param {number} now
   */
  take(users, now) {
    this.#refill(now);
    const needed = Math.max(1, Math.min(users, this.burst));
    if (this.tokens >= needed) {
      this.tokens -= users;
      return 0;
    }
    return (needed - this.tokens) / this.rate;
  }

  /**
   * What was taken corrected by `users` (more: taken too; fewer: given back).
   * @param {number} users
   */
  settle(users) {
    this.tokens = Math.min(this.burst, this.tokens - users);
  }

  /**
   * Whether forgetting the bucket forgives nothing: full now, and no request of it in flight.
   * @param {number} now
   */
  idle(now) {
    this.#refill(now);
    return this.pending === 0 && this.tokens >= this.burst;
  }

  /**
   * The RateLimit header: users left now and seconds until the bucket is full.
   * @param {number} now
   */
  state(now) {
    this.#refill(now);
    return stateOf(this.tokens, (this.burst - Math.min(this.burst, this.tokens)) / this.rate);
  }
}

/**
 * Users a request is charged before its body is read: from its Content-Length, else 1 (settled once
 * read).
 * @param {import('node:http').IncomingMessage} req
 */
export function estimatedUsers(req) {
  const length = Number(req.headers['content-length']);
  return Number.isSafeInteger(length) && length > 0
    ? Math.max(1, Math.floor(length / ESTIMATED_USER_BYTES))
    : 1;
}

/**
 * What a body refused after it was read (in part) cost, in users: those counted once it was parsed,
 * or one a ESTIMATED_USER_BYTES read if more (what bytes the readers left in res.locals).
 * @param {import('express').Response['locals']} locals
 */
export function usersRead({ bodyBytes = 0, bodyUsers = 0 }) {
  return Math.max(bodyUsers, Math.ceil(bodyBytes / ESTIMATED_USER_BYTES));
}

/**
 * A request refused (or its client gone) once its body was read, in part: its charge raised to what
 * was read, never lowered (nothing is given back for a refusal). Once a request; nothing without a
 * rate.
 * @param {import('express').Response} res
 */
export function chargeRefused(res) {
  const settle = res.locals.settleUsers;
  if (settle) settle(usersRead(res.locals), true);
}

/**
 * The step that charges a request to its client's bucket (http/client-directory.js gives a client
 * one when its rate is declared), or refuses it with 429 before its body is read. The answer to a
 * client with a rate carries RateLimit-Policy and RateLimit whatever its status; answer.js settles
 * the charge through res.locals.settleUsers, chargeRefused a refusal's.
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
    // A share of a deployment's rate being leased: the charge waits for it (briefly: the lease
    // falls back to a local share rather than keep it waiting).
    const leasing = bucket.wait?.(charged);
    if (leasing) return leasing.then(() => charge(res, next, client, bucket, charged));
    charge(res, next, client, bucket, charged);
  };
}
