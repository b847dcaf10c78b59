import { ApiError } from '../errors.js';
import { FairQueue, ONE_CLIENT, shareOf, withinShare } from './fair-share.js';
import { frozenWords } from '@sluice/env';

/** Bodies up to this size may use the reserved share, so they never starve behind large ones. */
export const SMALL_BODY_BYTES = 64 * 1024;
export const RESERVED_SHARE = 1 / 16;
/** In budgets: a waiting body stays unread in the kernel, a refused one is read and sent again. */
export const WAITING_BUDGETS = 64;

/** @typedef {import('./fair-share.js').FairClient} FairClient */
/** @typedef {{ bytes: number, large: boolean, released: boolean, client: FairClient }} Grant */
/** share: its client already fills its share of the waiting room while others wait too. */
export const REFUSAL_REASONS = frozenWords([
  'queue_full',
  'timeout',
  'aborted',
  'overflow',
  'share',
]);
/** @typedef {typeof REFUSAL_REASONS[number]} RefusalReason */

export class AdmissionRefusedError extends ApiError {
  /** @param {RefusalReason} reason */
  constructor(reason) {
    super('overloaded');
    this.name = 'AdmissionRefusedError';
    this.reason = reason;
  }
}

/**
 * @typedef {{ bytes: number, large: boolean, client: FairClient, admit: (grant: Grant) => void,
 *   timer?: NodeJS.Timeout }} Waiter
 */

/**
 * Large requests hold at most the budget less the reserve; small ones all of it, only the reserve
 * while a large one waits. Waiters queue per kind, clients in turn, bounded in time and bytes.
 */
export class AdmissionBudget {
  #total = 0;
  #large = 0;
  /** @type {FairQueue<Waiter>} */ #largeQueue = new FairQueue();
  /** @type {FairQueue<Waiter>} */ #smallQueue = new FairQueue();
  #waitingBytes = 0;
  /** By client key. @type {Map<string, number>} */ #held = new Map();
  /** By metric label. @type {Map<string, number>} */ #heldByLabel = new Map();
  /** @type {Map<string, { client: FairClient, bytes: number }>} by client key */
  #waitingBy = new Map();
  #waitingWeight = 0;

  /**
   * @param {{ budgetBytes: number, maxWaitMs: number,
   *   onChange?: (budget: AdmissionBudget) => void }} options
   */
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
    return {
      totalBytes: this.#total,
      largeBytes: this.#large,
      smallBytes: this.#total - this.#large,
      waiting: this.#largeQueue.length + this.#smallQueue.length,
    };
  }

  /** @returns {Iterable<[string, number]>} */
  heldByLabel() {
    return this.#heldByLabel.entries();
  }

  /** @param {FairClient} client */
  heldBy(client) {
    return this.#held.get(client.key) ?? 0;
  }

  /** The weight of the clients waiting other than `client`. @param {FairClient} client */
  #othersWaitingWeight(client) {
    const mine = this.#waitingBy.get(client.key);
    return this.#waitingWeight - (mine ? mine.client.weight : 0);
  }

  /** At most the large share: such a body runs alone, rather than never. @param {number} bytes */
  charge(bytes) {
    return Math.min(bytes, this.largeShareBytes);
  }

  /** Room, whoever asks. @param {number} bytes @param {number} held @param {boolean} heldLarge */
  #fits(bytes, held = 0, heldLarge = false) {
    const large = bytes > this.smallBodyBytes;
    const total = this.#total - held + bytes;
    const largeTotal = this.#large - (heldLarge ? held : 0) + (large ? bytes : 0);
    if (total > this.budgetBytes || largeTotal > this.largeShareBytes) return false;
    // While a large request waits, small ones may not take what it waits for.
    return large || this.#largeQueue.length === 0 || total - largeTotal <= this.reservedBytes;
  }

  /** @param {FairClient} client @param {number} bytes @param {number} [held] already counted */
  #withinShare(client, bytes, held = 0) {
    return withinShare(
      client,
      this.heldBy(client) - held,
      bytes,
      this.#othersWaitingWeight(client),
      this.budgetBytes,
    );
  }

  /** @param {number} bytes @param {FairClient} client @returns {Grant} */
  #take(bytes, client) {
    const large = bytes > this.smallBodyBytes;
    this.#total += bytes;
    if (large) this.#large += bytes;
    this.#hold(client, bytes);
    return { bytes, large, released: false, client };
  }

  /** @param {FairClient} client @param {number} bytes  negative: given back */
  #hold(client, bytes) {
    this.#held.set(client.key, (this.#held.get(client.key) ?? 0) + bytes);
    if (this.#held.get(client.key) === 0) this.#held.delete(client.key);
    this.#heldByLabel.set(client.label, (this.#heldByLabel.get(client.label) ?? 0) + bytes);
  }

  /** @param {FairClient} client @param {number} bytes  negative: no longer waiting */
  #wait(client, bytes) {
    this.#waitingBytes += bytes;
    const mine = this.#waitingBy.get(client.key);
    const left = (mine?.bytes ?? 0) + bytes;
    if (mine && left <= 0) {
      this.#waitingBy.delete(client.key);
      this.#waitingWeight -= mine.client.weight;
    } else if (mine) mine.bytes = left;
    else {
      this.#waitingBy.set(client.key, { client, bytes: left });
      this.#waitingWeight += client.weight;
    }
  }

  /** @param {number} bodyBytes @param {FairClient} [client] @returns {Grant | undefined} */
  tryAcquire(bodyBytes, client = ONE_CLIENT) {
    const bytes = this.charge(bodyBytes);
    const queue = bytes > this.smallBodyBytes ? this.#largeQueue : this.#smallQueue;
    if (queue.length > 0 || !this.#fits(bytes) || !this.#withinShare(client, bytes))
      return undefined;
    const grant = this.#take(bytes, client);
    this.onChange(this);
    return grant;
  }

  /**
   * @param {number} bodyBytes @param {AbortSignal} [signal] the client left
   * @param {FairClient} [client] @returns {Promise<Grant>}
   */
  acquire(bodyBytes, signal, client = ONE_CLIENT) {
    const now = this.tryAcquire(bodyBytes, client);
    if (now) return Promise.resolve(now);
    const bytes = this.charge(bodyBytes);
    const room = this.budgetBytes * WAITING_BUDGETS;
    if (this.maxWaitMs === 0 || this.#waitingBytes + bytes > room)
      return Promise.reject(new AdmissionRefusedError('queue_full'));
    // While others wait too, a client fills at most its share of the waiting room (but waits once).
    const mine = this.#waitingBy.get(client.key)?.bytes ?? 0;
    const others = this.#othersWaitingWeight(client);
    if (mine > 0 && others > 0 && mine + bytes > shareOf(client, others, room))
      return Promise.reject(new AdmissionRefusedError('share'));
    if (signal?.aborted) return Promise.reject(new AdmissionRefusedError('aborted'));

    return new Promise((resolve, reject) => {
      const large = bytes > this.smallBodyBytes;
      const queue = large ? this.#largeQueue : this.#smallQueue;
      /** @param {RefusalReason} reason */
      const giveUp = (reason) => {
        if (!queue.remove(client, waiter)) return;
        this.#wait(client, -bytes);
        signal?.removeEventListener('abort', onAbort);
        clearTimeout(waiter.timer);
        reject(new AdmissionRefusedError(reason));
        // Those held back for it (small ones, other clients' shares) may go now.
        this.#admitWaiters();
      };
      const onAbort = () => giveUp('aborted');
      /** @type {Waiter} */
      const waiter = {
        bytes,
        large,
        client,
        admit: (grant) => {
          signal?.removeEventListener('abort', onAbort);
          clearTimeout(waiter.timer);
          resolve(grant);
        },
      };
      waiter.timer = setTimeout(() => giveUp('timeout'), this.maxWaitMs);
      signal?.addEventListener('abort', onAbort, { once: true });
      queue.push(client, waiter);
      this.#wait(client, bytes);
      // Its client's waiting shrinks the others' shares: one of theirs may be the one to go now.
      this.#admitWaiters();
    });
  }

  /**
   * A grant grown without waiting (a body without a length); false: cut it off.
   * @param {Grant} grant @param {number} bodyBytes @returns {boolean}
   */
  grow(grant, bodyBytes) {
    const bytes = this.charge(bodyBytes);
    if (grant.released || bytes <= grant.bytes) return !grant.released;
    if (
      !this.#fits(bytes, grant.bytes, grant.large) ||
      !this.#withinShare(grant.client, bytes, grant.bytes)
    )
      return false;
    this.#total += bytes - grant.bytes;
    this.#hold(grant.client, bytes - grant.bytes);
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
    this.#hold(grant.client, -grant.bytes);
    this.#admitWaiters();
  }

  // Large requests first; within a kind, clients in turn. A client at its share or cap is passed
  // over; no other is, so a large request is not starved by smaller ones.
  #admitWaiters() {
    /** @param {FairClient} client @param {Waiter} first */
    const atLimit = (client, first) => !this.#withinShare(client, first.bytes);
    for (const queue of [this.#largeQueue, this.#smallQueue]) {
      for (
        let next = queue.peek(atLimit);
        next && this.#fits(next.bytes);
        next = queue.peek(atLimit)
      ) {
        queue.remove(next.client, next);
        this.#wait(next.client, -next.bytes);
        next.admit(this.#take(next.bytes, next.client));
      }
    }
    this.onChange(this);
  }
}
