import { ApiError } from '../errors.js';

// The in-flight work budget in body bytes (what a request holds grows with its body): bookkeeping
// of what requests hold and wait for, no HTTP (http/admission.js is its Express adapter).

/** Bodies up to this size are "small" and may use the reserved share, so they never starve behind large ones. */
export const SMALL_BODY_BYTES = 64 * 1024;
/** The share of the budget that large requests may never take. */
export const RESERVED_SHARE = 1 / 16;
/** Bytes that may wait, in budgets: a waiting body stays unread in the kernel, so waiting costs a socket. */
export const WAITING_BUDGETS = 4;

/** @typedef {{ bytes: number, large: boolean, released: boolean }} Grant  what one request holds; released once */
/** Why admission control refuses a request (metrics.js exports each from the start). */
export const REFUSAL_REASONS = /** @type {const} */ (['queue_full', 'timeout', 'aborted', 'overflow']);
/** @typedef {typeof REFUSAL_REASONS[number]} RefusalReason */

export class AdmissionRefusedError extends ApiError {
  /** @param {RefusalReason} reason */
  constructor(reason) {
    super('overloaded');
    this.name = 'AdmissionRefusedError';
    this.reason = reason;
  }
}

/** @typedef {{ bytes: number, large: boolean, admit: (grant: Grant) => void, timer?: NodeJS.Timeout }} Waiter */

/**
 * Large requests hold at most the budget less the reserve; small ones the whole budget, only the
 * reserve while a large one waits. Waiting: first come first served per kind, bounded in time and
 * to WAITING_BUDGETS budgets of bytes (beyond, refused at once).
 */
export class AdmissionBudget {
  #total = 0;
  #large = 0;
  /** @type {Waiter[]} */ #largeQueue = [];
  /** @type {Waiter[]} */ #smallQueue = [];
  #waitingBytes = 0;

  /** @param {{ budgetBytes: number, maxWaitMs: number, onChange?: (budget: AdmissionBudget) => void }} options  onChange: after every change (metrics) */
  constructor({ budgetBytes, maxWaitMs, onChange = () => {} }) {
    this.budgetBytes = budgetBytes;
    this.reservedBytes = Math.floor(budgetBytes * RESERVED_SHARE);
    this.largeShareBytes = budgetBytes - this.reservedBytes;
    this.smallBodyBytes = Math.min(SMALL_BODY_BYTES, this.reservedBytes);
    this.maxWaitMs = maxWaitMs;
    this.onChange = onChange;
  }

  /** @returns {{ totalBytes: number, largeBytes: number, smallBytes: number, waiting: number }} */
  get usage() {
    return { totalBytes: this.#total, largeBytes: this.#large, smallBytes: this.#total - this.#large, waiting: this.#largeQueue.length + this.#smallQueue.length };
  }

  /** What `bytes` of body cost: at most the large share (then it runs alone, rather than never). @param {number} bytes */
  charge(bytes) {
    return Math.min(bytes, this.largeShareBytes);
  }

  /** Whether a grant holding `held` may hold `bytes` instead. @param {number} bytes @param {number} held @param {boolean} heldLarge */
  #fits(bytes, held = 0, heldLarge = false) {
    const large = bytes > this.smallBodyBytes;
    const total = this.#total - held + bytes;
    const largeTotal = this.#large - (heldLarge ? held : 0) + (large ? bytes : 0);
    if (total > this.budgetBytes || largeTotal > this.largeShareBytes) return false;
    // While a large request waits, small ones may not take what it waits for.
    return large || this.#largeQueue.length === 0 || total - largeTotal <= this.reservedBytes;
  }

  /** @param {number} bytes @returns {Grant} */
  #take(bytes) {
    const large = bytes > this.smallBodyBytes;
    this.#total += bytes;
    if (large) this.#large += bytes;
    return { bytes, large, released: false };
  }

  /** A grant now if it fits and nobody of its kind waits before it. @param {number} bodyBytes @returns {Grant | undefined} */
  tryAcquire(bodyBytes) {
    const bytes = this.charge(bodyBytes);
    const queue = bytes > this.smallBodyBytes ? this.#largeQueue : this.#smallQueue;
    if (queue.length > 0 || !this.#fits(bytes)) return undefined;
    const grant = this.#take(bytes);
    this.onChange(this);
    return grant;
  }

  /** A grant once it fits, within `maxWaitMs`, else AdmissionRefusedError. @param {number} bodyBytes @param {AbortSignal} [signal]  the client left @returns {Promise<Grant>} */
  acquire(bodyBytes, signal) {
    const now = this.tryAcquire(bodyBytes);
    if (now) return Promise.resolve(now);
    const bytes = this.charge(bodyBytes);
    if (this.maxWaitMs === 0 || this.#waitingBytes + bytes > this.budgetBytes * WAITING_BUDGETS) return Promise.reject(new AdmissionRefusedError('queue_full'));
    if (signal?.aborted) return Promise.reject(new AdmissionRefusedError('aborted'));

    return new Promise((resolve, reject) => {
      const large = bytes > this.smallBodyBytes;
      const queue = large ? this.#largeQueue : this.#smallQueue;
      /** @param {RefusalReason} reason */
      const giveUp = (reason) => {
        const at = queue.indexOf(waiter);
        if (at === -1) return;
        queue.splice(at, 1);
        this.#waitingBytes -= bytes;
        signal?.removeEventListener('abort', onAbort);
        clearTimeout(waiter.timer);
        reject(new AdmissionRefusedError(reason));
        // A large request that stops waiting may unblock the small ones held back for it.
        this.#admitWaiters();
      };
      const onAbort = () => giveUp('aborted');
      /** @type {Waiter} */
      const waiter = {
        bytes,
        large,
        admit: (grant) => {
          signal?.removeEventListener('abort', onAbort);
          clearTimeout(waiter.timer);
          resolve(grant);
        },
      };
      waiter.timer = setTimeout(() => giveUp('timeout'), this.maxWaitMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      queue.push(waiter);
      this.#waitingBytes += bytes;
      this.onChange(this);
    });
  }

  /** A grant grown to `bodyBytes` without waiting (a body without a length); false: cut it off. @param {Grant} grant @param {number} bodyBytes @returns {boolean} */
  grow(grant, bodyBytes) {
    const bytes = this.charge(bodyBytes);
    if (grant.released || bytes <= grant.bytes) return !grant.released;
    if (!this.#fits(bytes, grant.bytes, grant.large)) return false;
    this.#total += bytes - grant.bytes;
    if (grant.large) this.#large -= grant.bytes;
    grant.large = bytes > this.smallBodyBytes;
    if (grant.large) this.#large += bytes;
    grant.bytes = bytes;
    this.onChange(this);
    return true;
  }

  /** Gives the bytes back (once) and admits whoever fits now. @param {Grant} grant */
  release(grant) {
    if (grant.released) return;
    grant.released = true;
    this.#total -= grant.bytes;
    if (grant.large) this.#large -= grant.bytes;
    this.#admitWaiters();
  }

  // Large requests first, in order (the one at the head is never passed by another large one),
  // then small ones.
  #admitWaiters() {
    for (const queue of [this.#largeQueue, this.#smallQueue]) {
      while (queue.length > 0 && this.#fits(queue[0].bytes)) {
        const waiter = /** @type {Waiter} */ (queue.shift());
        this.#waitingBytes -= waiter.bytes;
        waiter.admit(this.#take(waiter.bytes));
      }
    }
    this.onChange(this);
  }
}
