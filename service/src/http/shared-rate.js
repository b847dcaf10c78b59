import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { TokenBucket, policyOf, stateOf } from './rate-limit.js';

// A client's rate held for the whole deployment: each process leases a share of it, fair by
// demand, and spends it in a bucket of its own, so a request costs no statement. A failed
// statement never fails or delays a request: shares fall back to the rate over the processes last
// known until a renewal goes through again.

export const RENEW_MS = 3000;
/** Soon after a lease was taken, a fallback left, a late renewal or a change in sharing. */
export const RENEW_SOON_MS = 500;
export const RETRY_MS = 1000;
/** Two renewals' time: one late renewal loses no lease. */
export const LEASE_TTL_MS = 2 * RENEW_MS + 500;
/** Past it, requests wait for no lease until a renewal answers. */
export const LEASE_WAIT_MS = 500;
const MIN_SHARE = 0.01;
/** Room to grow: a process needs this many times what it was asked for. */
const HEADROOM = 2;
/** Times its part of the burst a share's bucket holds, so its part of the rate is not lost idle. */
const SHARE_ROOM = 2;
/** A lease just taken has seen a request or a few: demand is over at least this long. */
const MIN_WINDOW_MS = RENEW_SOON_MS;

/** @typedef {import('./rate-types.js').RateBucket} RateBucket */
/** @typedef {import('./rate-types.js').Limits} Limits */
/** @typedef {import('./rate-types.js').LeaseStore} LeaseStore */
/** @typedef {import('./rate-types.js').SharedRateMetrics} SharedRateMetrics */
/** @typedef {import('./rate-types.js').Timings} Timings */

/** Declared limits (policy, 429's words) over this process's share. @implements {RateBucket} */
export class SharedBucket {
  pending = 0;
  /** Users asked for since the last renewal, and in the period before it. */
  asked = 0;
  askedBefore = 0;
  periodStart = 0;
  windowStart = 0;
  status = /** @type {'out' | 'joining' | 'held'} */ ('out');
  share = 1;
  sharing = 0;
  /** @type {{ promise: Promise<void>, resolve: () => void } | undefined} */
  joined;
  #local;
  #rates;

  /** @param {SharedRates} rates @param {string} key @param {Limits} limits @param {number} now */
  constructor(rates, key, limits, now) {
    this.#rates = rates;
    this.key = key;
    this.rate = limits.rate;
    this.burst = limits.burst;
    this.policy = policyOf(limits);
    this.#local = new TokenBucket(limits, now);
  }

  /** @param {number} users */
  wait(users) {
    this.asked += users;
    return this.status === 'held' ? undefined : this.#rates.join(this);
  }

  /** @param {number} users @param {number} now */
  take(users, now) {
    return this.#local.take(users, now);
  }

  /** @param {number} users */
  settle(users) {
    this.#local.settle(users);
  }

  /** Forgetting the client forgives nothing. @param {number} now */
  idle(now) {
    return this.pending === 0 && this.#local.level(now) >= this.#local.burst;
  }

  state(/** @type {number} */ now) {
    const left = Math.min(this.burst, this.#local.level(now) / this.share);
    return stateOf(left, (this.burst - left) / this.rate);
  }

  /** @param {number} now */
  level(now) {
    return this.#local.level(now);
  }

  /** @param {Limits} limits @param {number} now */
  limit(limits, now) {
    this.rate = limits.rate;
    this.burst = limits.burst;
    this.policy = policyOf(limits);
    this.reshare(this.share, now);
  }

  /** A debt is never forgiven. @param {number} share @param {number} now @param {number} [level] */
  reshare(share, now, level) {
    this.share = share;
    const part = this.burst * share;
    this.#local.resize(
      { rate: this.rate * share, burst: Math.min(this.burst, SHARE_ROOM * part) },
      now,
      level === undefined ? level : Math.min(part * level, this.#local.level(now)),
    );
  }

  /** @param {number} now */
  demand(now) {
    return (
      (this.asked + this.askedBefore) / (Math.max(now - this.windowStart, MIN_WINDOW_MS) / 1000)
    );
  }

  /** @param {number} now */
  nextPeriod(now) {
    this.askedBefore = this.asked;
    this.asked = 0;
    this.windowStart = this.periodStart;
    this.periodStart = now;
  }
}

export class SharedRates {
  /** @type {Map<string, SharedBucket>} */ #buckets = new Map();
  /** @type {ReturnType<typeof setTimeout> | undefined} */ #timer;
  /** @type {Promise<void> | undefined} */ #renewing;
  #again = false;
  #changed = false;
  #fallback = false;
  /** No request waits for a lease until the late renewal answers. */
  #late = false;
  #closed = false;
  #processes = 1;
  #store;
  #logger;
  #metrics;
  #now;
  /** @type {Timings} */ #timings;

  /**
   * @param {{ store: LeaseStore, logger: import('pino').Logger, metrics: SharedRateMetrics,
   *   now?: () => number, name?: string, timings?: Partial<Timings> }} options
   */
  constructor({ store, logger, metrics, now = () => performance.now(), name, timings = {} }) {
    this.#store = store;
    this.#logger = logger;
    this.#metrics = metrics;
    this.#now = now;
    this.process = name ?? processName();
    this.#timings = {
      renewMs: RENEW_MS,
      renewSoonMs: RENEW_SOON_MS,
      retryMs: RETRY_MS,
      ttlMs: LEASE_TTL_MS,
      waitMs: LEASE_WAIT_MS,
      ...timings,
    };
  }

  /**
   * @param {string} key @param {{ rate: number, burst?: number }} declared @param {number} now
   * @param {RateBucket} [before] @returns {SharedBucket}
   */
  make(key, { rate, burst = rate }, now, before) {
    const bucket =
      this.#buckets.get(key) ??
      (before instanceof SharedBucket && before.key === key ? before : undefined);
    if (!bucket) return new SharedBucket(this, key, { rate, burst }, now);
    if (bucket.rate !== rate || bucket.burst !== burst) bucket.limit({ rate, burst }, now);
    return bucket;
  }

  get fallback() {
    return this.#fallback;
  }

  get leases() {
    return this.#buckets.size;
  }

  /** No wait while on the fallback or a renewal is late. @param {SharedBucket} bucket */
  join(bucket) {
    if (bucket.status === 'joining') return bucket.joined?.promise;
    const now = this.#now();
    const before = this.#buckets.get(bucket.key);
    if (before && before !== bucket) this.#hold(before, before.share, now);
    bucket.status = 'joining';
    bucket.periodStart = bucket.windowStart = now;
    this.#buckets.set(bucket.key, bucket);
    this.#soon(0);
    if (this.#fallback || this.#late || this.#closed) {
      this.#hold(bucket, 1 / this.#processes, now, 1);
      return undefined;
    }
    /** @type {() => void} */ let resolve = () => {};
    const promise = new Promise((r) => (resolve = () => r(undefined)));
    bucket.joined = { promise, resolve };
    return promise;
  }

  async close() {
    this.#closed = true;
    clearTimeout(this.#timer);
    await withDeadline(this.#renewing ?? Promise.resolve(), this.#timings.waitMs).catch(() => {});
    const clients = [...this.#buckets.keys()];
    this.#metrics.processes(0);
    if (clients.length === 0 || this.#store.closed()) return;
    await withDeadline(
      this.#store.release({ process: this.process, clients }),
      this.#timings.waitMs,
    ).catch(() => {});
  }

  /** @param {number} ms */
  #soon(ms) {
    if (this.#closed) return;
    if (this.#renewing) {
      if (ms === 0) this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#renew(), ms);
    // A renewal due at once may have a request waiting; the periodic ones keep nothing alive.
    if (ms > 0) this.#timer.unref();
  }

  #renew() {
    this.#timer = undefined;
    this.#again = false;
    if (this.#store.closed()) return this.#stop();
    const now = this.#now();
    const all = [...this.#buckets.values()];
    const kept = all.filter((b) => b.status === 'joining' || b.asked + b.askedBefore > 0);
    const keeping = new Set(kept);
    const released = all.filter((b) => !keeping.has(b)).map((b) => b.key);
    for (const key of released) {
      const bucket = /** @type {SharedBucket} */ (this.#buckets.get(key));
      bucket.status = 'out';
      this.#buckets.delete(key);
    }
    const demand = new Map(kept.map((b) => [b, b.demand(now)]));
    for (const bucket of kept) bucket.nextPeriod(now);
    const renewed = kept.length > 0 ? this.#send(demand, released) : this.#giveBack(released);
    this.#renewing = renewed.finally(() => {
      this.#renewing = undefined;
      this.#planNext();
    });
  }

  /** @param {Map<SharedBucket, number>} demand @param {string[]} released */
  async #send(demand, released) {
    const late = setTimeout(() => {
      this.#late = true;
      this.#holdJoining(1 / this.#processes);
    }, this.#timings.waitMs);
    try {
      const answer = await this.#store.renew({
        process: this.process,
        leases: [...demand].map(([bucket, asked]) => ({ client: bucket.key, demand: asked })),
        released,
        ttlMs: this.#timings.ttlMs,
      });
      this.#apply(answer, demand);
    } catch (err) {
      this.#metrics.statement(false);
      this.#fallBack(err);
    } finally {
      clearTimeout(late);
    }
  }

  /** A failure is no fallback: the rows expire. @param {string[]} released */
  async #giveBack(released) {
    try {
      await this.#store.release({ process: this.process, clients: released });
      this.#metrics.statement(true);
      this.#metrics.processes(0);
    } catch {
      this.#metrics.statement(false);
    }
  }

  /**
   * @param {Awaited<ReturnType<LeaseStore['renew']>>} answer
   * @param {Map<SharedBucket, number>} demand
   */
  #apply({ processes, others }, demand) {
    this.#metrics.statement(true);
    this.#metrics.processes(processes);
    this.#processes = processes;
    const now = this.#now();
    // After a fallback, or an answer so late that requests went on without it: soon again.
    let changed = this.#fallback || this.#late;
    this.#late = false;
    for (const [bucket, mine] of demand) {
      const theirs = others.get(bucket.key) ?? [];
      const share = Math.max(MIN_SHARE, fairShare(bucket.rate, mine, theirs));
      const first = bucket.status === 'joining';
      changed ||= first || bucket.sharing !== theirs.length;
      bucket.sharing = theirs.length;
      // A first lease starts empty when others share the client: the burst is in their buckets.
      this.#hold(bucket, share, now, first ? (theirs.length > 0 ? 0 : 1) : undefined);
    }
    this.#changed = changed;
    this.#logger.debug(
      {
        processes,
        shares: Object.fromEntries([...demand.keys()].map((b) => [b.key, b.share])),
      },
      'rate leases renewed',
    );
    if (!this.#fallback) return;
    this.#fallback = false;
    this.#metrics.fallback(false);
    this.#logger.info({ processes }, 'the shared rates are reached again');
  }

  /** Each lease takes the rate over the processes last known, said once. @param {unknown} err */
  #fallBack(err) {
    const now = this.#now();
    const share = 1 / this.#processes;
    if (!this.#fallback) {
      this.#fallback = true;
      this.#metrics.fallback(true);
      this.#logger.warn(
        { err, processes: this.#processes },
        'the shared rates cannot be reached: ' +
          'each process takes its rates over the processes it knows',
      );
    }
    this.#holdJoining(share);
    for (const bucket of this.#buckets.values())
      if (bucket.share !== share) bucket.reshare(share, now);
  }

  /** @param {number} share */
  #holdJoining(share) {
    const now = this.#now();
    for (const bucket of this.#buckets.values())
      if (bucket.status === 'joining') this.#hold(bucket, share, now, 1);
  }

  /**
   * @param {SharedBucket} bucket @param {number} share @param {number} now
   * @param {number} [level]
   */
  #hold(bucket, share, now, level) {
    bucket.reshare(share, now, level);
    bucket.status = 'held';
    bucket.joined?.resolve();
    bucket.joined = undefined;
  }

  #planNext() {
    if (this.#closed || this.#buckets.size === 0) return;
    const { renewMs, renewSoonMs, retryMs } = this.#timings;
    this.#soon(this.#again ? 0 : this.#fallback ? retryMs : this.#changed ? renewSoonMs : renewMs);
  }

  #stop() {
    this.#closed = true;
    this.#holdJoining(1 / this.#processes);
  }
}

/**
 * Max-min fair, so that every process computes the same shares from the same demands and they add
 * up to one; what nobody needs is split evenly among all.
 * @param {number} rate @param {number} mine @param {readonly number[]} others
 */
export function fairShare(rate, mine, others) {
  const needs = [mine, ...others].map((d) => HEADROOM * Math.max(0, d));
  const total = needs.reduce((sum, need) => sum + need, 0);
  if (total <= rate) return (needs[0] + (rate - total) / needs.length) / rate;
  const ascending = [...needs].sort((a, b) => a - b);
  let left = rate;
  let level = rate;
  for (const [i, need] of ascending.entries()) {
    level = left / (ascending.length - i);
    if (need >= level) break;
    left -= need;
  }
  return Math.min(needs[0], level) / rate;
}

/** Host and pid for whoever reads the table. */
const processName = () => `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;

/** @template T @param {Promise<T>} promise @param {number} ms @returns {Promise<T>} */
function withDeadline(promise, ms) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */ let timer;
  const late = new Promise((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error('no answer in time')), ms);
  });
  return /** @type {Promise<T>} */ (Promise.race([promise, late])).finally(() =>
    clearTimeout(timer),
  );
}
