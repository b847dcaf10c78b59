import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { TokenBucket, policyOf, stateOf } from './rate-limit.js';

// A client's rate held for the whole deployment: each process that serves the client leases a
// share of it from the database, fair by what each live process was asked for (fairShare), and
// spends its share in a token bucket of its own (share × rate, filled up to SHARE_ROOM × share ×
// burst), so a request costs no statement. One statement a process renews every lease it holds and
// its heartbeat (every RENEW_MS, or RENEW_SOON_MS after its shares changed), gives back the leases
// no longer asked for, and reads the others' demand; a process that dies stops renewing, and its
// share is the others' once its rows expire (LEASE_TTL_MS). A client seen for the first time waits
// for its lease, at most LEASE_WAIT_MS (not at all while a renewal is late). A statement that
// fails never fails or delays a request: every share falls back to the rate over the processes
// last known (said once in the log and in a metric) until a renewal goes through again. Without a
// rate, nothing here runs: no statement, no timer.

/** Leases renewed this often while nothing changes. */
export const RENEW_MS = 3000;
/**
 * ... and this soon after a lease was taken, the process left its fallback, a renewal was late, or
 * sharing changed.
 */
export const RENEW_SOON_MS = 500;
/** A renewal tried again this often while the shares cannot be reached. */
export const RETRY_MS = 1000;
/** A lease, and a process's heartbeat, hold this long unless renewed: two renewals' time. */
export const LEASE_TTL_MS = 2 * RENEW_MS + 500;
/**
 * The longest a request waits for its client's lease (a renewal's answer, which may need a new
 * connection first); past it, requests wait for none until a renewal answers.
 */
export const LEASE_WAIT_MS = 500;
/** A process asked for anything gets at least this share: its next renewal says how much more. */
const MIN_SHARE = 0.01;
/** What a process needs of a rate: this many times what it was asked for, room to grow. */
const HEADROOM = 2;
/**
 * A share's bucket holds up to this many times its part of the burst (never more than the whole
 * burst): filled at its share of the rate only, it can wait a while for a request without letting
 * its part of the rate go unused, as a bucket of a few requests' size would whenever none comes.
 */
const SHARE_ROOM = 2;
/** Demand is users over at least this long: a lease just taken has seen one request or a few. */
const MIN_WINDOW_MS = RENEW_SOON_MS;

/** @typedef {import('./rate-limit.js').RateBucket} RateBucket */
/** @typedef {{ rate: number, burst: number }} Limits */
/**
 * The leases' statements (db/rate-leases.js's createLeaseStore).
 * @typedef {{ renew: (renewal: { process: string, leases: { client: string, demand: number }[],
 *   released: string[], ttlMs: number }) => Promise<{ processes: number,
 *   others: Map<string, number[]> }>,
 *   release: (leases: { process: string, clients: string[] }) => Promise<void>,
 *   closed: () => boolean }} LeaseStore
 */
/**
 * statement: one renewal answered, or failed; fallback: on its local share or not; processes: the
 * processes known to lease rates, this one included.
 * @typedef {{ statement: (ok: boolean) => void, fallback: (on: boolean) => void,
 *   processes: (count: number) => void }} SharedRateMetrics
 */
/**
 * @typedef {{ renewMs: number, renewSoonMs: number, retryMs: number, ttlMs: number,
 *   waitMs: number }} Timings
 */

/**
 * One client's bucket in this process: the client's declared rate and burst (its policy, its 429's
 * words) over a local bucket of this process's share of them.
 * @implements {RateBucket}
 */
export class SharedBucket {
  /** Requests charged whose answer is not done. */
  pending = 0;
  /** Users asked for since the last renewal, and in the period before it. */
  asked = 0;
  askedBefore = 0;
  /** When the period of `asked` began, and that of `askedBefore`. */
  periodStart = 0;
  windowStart = 0;
  /** Out of the leases (new, or given back), joining them, or held. */
  status = /** @type {'out' | 'joining' | 'held'} */ ('out');
  share = 1;
  /** Other processes leasing this client's rate, at the last renewal. */
  sharing = 0;
  /** @type {{ promise: Promise<void>, resolve: () => void } | undefined} */
  joined;
  #local;
  #rates;

  /**
   * @param {SharedRates} rates @param {string} key the client's scope @param {Limits} limits
   * @param {number} now
   */
  constructor(rates, key, limits, now) {
    this.#rates = rates;
    this.key = key;
    this.rate = limits.rate;
    this.burst = limits.burst;
    this.policy = policyOf(limits);
    this.#local = new TokenBucket(limits, now);
  }

  /** Told of each request first: a promise while the lease is being taken. @param {number} users */
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

  /** Full, and no request in flight: forgetting the client forgives nothing. @param {number} now */
  idle(now) {
    return this.pending === 0 && this.#local.level(now) >= this.#local.burst;
  }

  /** The RateLimit field of the deployment's bucket, as this process's share tells it. */
  state(/** @type {number} */ now) {
    const left = Math.min(this.burst, this.#local.level(now) / this.share);
    return stateOf(left, (this.burst - left) / this.rate);
  }

  /** Users in this process's bucket now (below 0: owed). @param {number} now */
  level(now) {
    return this.#local.level(now);
  }

  /** The client's limits read again with its token. @param {Limits} limits @param {number} now */
  limit(limits, now) {
    this.rate = limits.rate;
    this.burst = limits.burst;
    this.policy = policyOf(limits);
    this.reshare(this.share, now);
  }

  /**
   * This process's share from now on: its level kept (at most what its bucket holds now), or
   * lowered to `level` times its part of the burst (a debt is never forgiven).
   * @param {number} share @param {number} now @param {number} [level]
   */
  reshare(share, now, level) {
    this.share = share;
    const part = this.burst * share;
    this.#local.resize(
      { rate: this.rate * share, burst: Math.min(this.burst, SHARE_ROOM * part) },
      now,
      level === undefined ? level : Math.min(part * level, this.#local.level(now)),
    );
  }

  /** Users a second asked for over the last two periods. @param {number} now */
  demand(now) {
    return (
      (this.asked + this.askedBefore) / (Math.max(now - this.windowStart, MIN_WINDOW_MS) / 1000)
    );
  }

  /** A renewal begins a period. @param {number} now */
  nextPeriod(now) {
    this.askedBefore = this.asked;
    this.asked = 0;
    this.windowStart = this.periodStart;
    this.periodStart = now;
  }
}

/**
 * The process's leases of its clients' rates, and the one renewal that keeps them; its buckets by
 * client scope (ClientDirectory makes them through `make`).
 */
export class SharedRates {
  /** @type {Map<string, SharedBucket>} */ #buckets = new Map();
  /** @type {ReturnType<typeof setTimeout> | undefined} */ #timer;
  /** @type {Promise<void> | undefined} */ #renewing;
  /** A lease was asked for while a renewal ran: the next one at once. */
  #again = false;
  /** The last renewal changed who shares: the next one soon. */
  #changed = false;
  #fallback = false;
  /** A renewal has not answered in time: no request waits for a lease until one does. */
  #late = false;
  #closed = false;
  /** Processes leasing rates, this one included, as the last renewal found them. */
  #processes = 1;
  #store;
  #logger;
  #metrics;
  #now;
  /** @type {Timings} */ #timings;

  /**
   * @param {{ store: LeaseStore, logger: import('pino').Logger, metrics: SharedRateMetrics,
   *   now?: () => number, name?: string, timings?: Partial<Timings> }} options name: this
   *   process's in the leases (default: its host, pid and a random part)
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
   * The bucket of a client (by scope) with these limits: the one leased or `before`, its limits
   * updated, or a new one.
   * @param {string} key @param {{ rate: number, burst?: number }} declared @param {number} now
   * @param {RateBucket} [before] the client's bucket under the limits it had
   * @returns {SharedBucket}
   */
  make(key, { rate, burst = rate }, now, before) {
    const bucket =
      this.#buckets.get(key) ??
      (before instanceof SharedBucket && before.key === key ? before : undefined);
    if (!bucket) return new SharedBucket(this, key, { rate, burst }, now);
    if (bucket.rate !== rate || bucket.burst !== burst) bucket.limit({ rate, burst }, now);
    return bucket;
  }

  /** Whether the shares are the local fallback's. */
  get fallback() {
    return this.#fallback;
  }

  /** Leases held or being taken. */
  get leases() {
    return this.#buckets.size;
  }

  /**
   * A bucket out of the leases asks for one: at once its fallback share while the shares cannot be
   * reached or a renewal is late, else a promise of its lease (or of the fallback share, once the
   * renewal is late).
   * @param {SharedBucket} bucket
   * @returns {Promise<void> | undefined}
   */
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

  /** Stops renewing and gives the leases back at once (a stopping process). */
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

  /** The next renewal in `ms`, or at once after the one running. @param {number} ms */
  #soon(ms) {
    if (this.#closed) return;
    if (this.#renewing) {
      if (ms === 0) this.#again = true;
      return;
    }
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#renew(), ms);
    // A renewal due at once is what a request may be waiting for; the periodic ones keep nothing
    // alive.
    if (ms > 0) this.#timer.unref();
  }

  /** One renewal: the leases asked for in the last two periods kept, the others given back. */
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

  /**
   * The renewal's statement, its answer applied; failed, the fallback. Late, the requests waiting
   * for a lease go on, on the fallback share, until it answers.
   * @param {Map<SharedBucket, number>} demand the leases kept, and what each was asked for
   * @param {string[]} released
   */
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

  /**
   * The last leases given back: the process leases nothing now (a failure is no fallback: their
   * rows expire).
   * @param {string[]} released
   */
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
   * A renewal's answer: each lease's share of its rate, by demand against the other processes'.
   * @param {Awaited<ReturnType<LeaseStore['renew']>>} answer
   * @param {Map<SharedBucket, number>} demand what each lease renewed was asked for
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
      // A first lease starts full only when no other process is asked for the client: else the
      // burst is in their buckets already.
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

  /**
   * The shares cannot be reached (a renewal failed: the database down, its time limits, the pool
   * or a pooler with no connection to give): each lease takes the rate over the processes last
   * known, said once.
   * @param {unknown} err
   */
  #fallBack(err) {
    const now = this.#now();
    const share = 1 / this.#processes;
    if (!this.#fallback) {
      this.#fallback = true;
      this.#metrics.fallback(true);
      this.#logger.warn(
        { err, processes: this.#processes },
        'the shared rates cannot be reached: each process takes its rates over the processes it knows',
      );
    }
    this.#holdJoining(share);
    for (const bucket of this.#buckets.values())
      if (bucket.share !== share) bucket.reshare(share, now);
  }

  /**
   * The buckets waiting for a lease go on, on `share`, starting full (each process's part of the
   * burst).
   * @param {number} share
   */
  #holdJoining(share) {
    const now = this.#now();
    for (const bucket of this.#buckets.values())
      if (bucket.status === 'joining') this.#hold(bucket, share, now, 1);
  }

  /** @param {SharedBucket} bucket @param {number} share @param {number} now @param {number} [level] */
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

  /** The pool is closing: no more statements; whoever waits takes the fallback. */
  #stop() {
    this.#closed = true;
    this.#holdJoining(1 / this.#processes);
  }
}

/**
 * A process's share of a rate, max-min fair: each process needs HEADROOM times the users a second
 * it was asked for; those that need less than an even split of what is left get what they need,
 * the others split the rest evenly, and what nobody needs is split evenly among all. Computed alike
 * by every process from the same demands, the shares add up to one; processes all asked for more
 * than the rate get one each of the same part, however their demands differ.
 * @param {number} rate users a second
 * @param {number} mine this process's demand, users a second
 * @param {readonly number[]} others the other processes' demands
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

/** This process's name in the leases: its host and pid (for whoever reads the table), and a random part. */
const processName = () => `${os.hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;

/**
 * @template T
 * @param {Promise<T>} promise @param {number} ms
 * @returns {Promise<T>}
 */
function withDeadline(promise, ms) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */ let timer;
  const late = new Promise((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error('no answer in time')), ms);
  });
  return /** @type {Promise<T>} */ (Promise.race([promise, late])).finally(() =>
    clearTimeout(timer),
  );
}
