// Fairness between the admission budget's clients: start-time fair queuing over bytes, by weight.

/**
 * key: the client's scope (authenticate.js); label: its bounded metric label.
 * @typedef {{ key: string, label: string, weight: number, maxInFlightBytes?: number }} FairClient
 */

/** The one client of a service without credentials. */
export const ANONYMOUS_CLIENT = 'anonymous';
/** @type {FairClient} */
export const ONE_CLIENT = Object.freeze({
  key: ANONYMOUS_CLIENT,
  label: ANONYMOUS_CLIENT,
  weight: 1,
});

/**
 * Always when it holds nothing (a request larger than its share runs alone rather than never);
 * else within its own cap and, while others wait, its weighted share of `budgetBytes`.
 * @param {FairClient} client @param {number} heldBytes @param {number} bytes
 * @param {number} othersWaitingWeight @param {number} budgetBytes
 */
export function withinShare(client, heldBytes, bytes, othersWaitingWeight, budgetBytes) {
  if (heldBytes <= 0) return true;
  if (client.maxInFlightBytes !== undefined && heldBytes + bytes > client.maxInFlightBytes)
    return false;
  return (
    othersWaitingWeight === 0 ||
    heldBytes + bytes <= shareOf(client, othersWaitingWeight, budgetBytes)
  );
}

/** @param {FairClient} client @param {number} othersWaitingWeight @param {number} bytes */
export const shareOf = (client, othersWaitingWeight, bytes) =>
  (bytes * client.weight) / (client.weight + othersWaitingWeight);

/**
 * @template {{ bytes: number }} T
 * @typedef {{ client: FairClient, queue: (T & { start: number })[], finish: number }} Flow
 */

/**
 * A queue per client; the next is the head with the smallest start: its client's previous finish,
 * or the virtual time if later (a finish adds the bytes over the weight). So a client that waited
 * little goes before one with a backlog, and each is let in bytes in proportion to its weight.
 * @template {{ bytes: number }} T
 */
export class FairQueue {
  /** @type {Map<string, Flow<T>>} */ #flows = new Map();
  #virtual = 0;
  #length = 0;

  get length() {
    return this.#length;
  }

  /** @returns {Iterable<FairClient>} */
  *clients() {
    for (const flow of this.#flows.values()) yield flow.client;
  }

  /** @param {string} key */
  has(key) {
    return this.#flows.has(key);
  }

  /** @param {FairClient} client @param {T} item */
  push(client, item) {
    let flow = this.#flows.get(client.key);
    if (!flow) this.#flows.set(client.key, (flow = { client, queue: [], finish: this.#virtual }));
    const start = Math.max(this.#virtual, flow.finish);
    flow.finish = start + item.bytes / client.weight;
    flow.queue.push(Object.assign(item, { start }));
    this.#length++;
  }

  /**
   * The next request of the clients `skip` leaves in (one whose first is over its own limit).
   * @param {(client: FairClient, first: T) => boolean} [skip] @returns {T | undefined}
   */
  peek(skip) {
    /** @type {(T & { start: number }) | undefined} */
    let next;
    for (const flow of this.#flows.values()) {
      const head = flow.queue[0];
      if (
        (next === undefined || head.start < next.start) &&
        (skip === undefined || !skip(flow.client, head))
      )
        next = head;
    }
    return next;
  }

  /** False when it is not waiting. @param {FairClient} client @param {T} item */
  remove(client, item) {
    const flow = this.#flows.get(client.key);
    const at = flow ? flow.queue.indexOf(/** @type {T & { start: number }} */ (item)) : -1;
    if (!flow || at === -1) return false;
    const [taken] = flow.queue.splice(at, 1);
    this.#length--;
    // Let in: the virtual time moves to where it started.
    if (at === 0) this.#virtual = Math.max(this.#virtual, taken.start);
    if (flow.queue.length === 0) this.#flows.delete(client.key);
    return true;
  }
}
