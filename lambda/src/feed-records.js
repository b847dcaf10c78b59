import { createHash } from 'node:crypto';
import { chunksOf, runsOf } from './chunks.js';
import { createFailureLedger, poison } from './failure-ledger.js';
import { unpackRecords } from './records.js';
import { PATHS } from './service-client.js';

/** @typedef {import('./records.js').Item} Item */
/** @typedef {import('./config.js').FeederConfig} FeederConfig */
/** @typedef {import('./failure-ledger.js').Failure} Failure */
/**
 * stored: users taken; erasures: erasures taken, of which erased and absent (not replayed).
 * @typedef {{ posts: number, retries: number, inserted: number, updated: number, stale: number,
 *   stored: number, quarantined: number, replayed: number, erasures: number, erased: number,
 *   absent: number }} FeedStats
 */
/**
 * deadline: epoch ms after which no request starts; credentialsRefused: on a 401 or 403, with
 * the operation refused.
 * @typedef {{ config: FeederConfig, deadline: number,
 *   postBatch: typeof import('./service-client.js').postBatch,
 *   traceparent?: () => string | undefined, rereadToken?: () => Promise<FeederConfig>,
 *   credentialsRefused?: (status: number, operation: import('./records.js').Operation) => void
 *   }} FeedOptions
 */

/**
 * `newerToken(used)`: the token read again (once an invocation, shared) differs from `used`.
 * @param {FeederConfig} config @param {(() => Promise<FeederConfig>) | undefined} rereadToken
 */
function tokenKeeper(config, rereadToken) {
  let current = config;
  /** @type {Promise<void> | undefined} */
  let reread = undefined;
  return {
    current: () => current,
    /** @param {FeederConfig} used */
    async newerToken(used) {
      if (!rereadToken) return false;
      // A failed read leaves the token as it was, so the chunk fails as unavailable.
      reread ??= rereadToken().then(
        (fresh) => void (current = fresh),
        () => undefined,
      );
      await reread;
      return current.ingestToken !== used.ingestToken;
    },
  };
}

/** A message's users are contiguous. @param {Item[]} items @returns {Map<Item, number>} */
function placesInMessages(items) {
  const places = new Map();
  let message = '';
  let place = 0;
  for (const item of items) {
    place = item.messageId === message ? place + 1 : 0;
    message = item.messageId;
    places.set(item, place);
  }
  return places;
}

/**
 * The same whenever SQS delivers the same users of the same messages together again (a message's
 * body never changes), another for any other set.
 * @param {Item[]} chunk @param {Map<Item, number>} places
 */
export function chunkKey(chunk, places) {
  const { operation, resolution } = chunk[0];
  const hash = createHash('sha256').update(operation === 'erase' ? operation : resolution);
  for (const item of chunk) hash.update(`\n${item.messageId}:${places.get(item)}`);
  return `sqs-${hash.digest('base64url')}`;
}

/**
 * @typedef {FeedOptions & { ledger: import('./failure-ledger.js').FailureLedger,
 *   tokens: ReturnType<typeof tokenKeeper>, stats: FeedStats, places: Map<Item, number> }} Feed
 */
/** @typedef {import('./service-client.js').PostOutcome} PostOutcome */

/** @param {Feed} feed @param {Item[]} chunk @returns {Promise<void>} */
async function feedChunk(feed, chunk) {
  const { ledger, tokens, stats } = feed;
  let pending = chunk;
  for (;;) {
    // A failed message, or one behind its group's failure, fails whole: none of its users goes.
    pending = pending.filter((item) => !ledger.hasFailed(item.messageId));
    if (pending.length === 0) return;
    const used = tokens.current();
    const { operation, resolution, invalid } = pending[0];
    const outcome = await feed.postBatch(
      used,
      pending.map((item) => item.user),
      {
        path: PATHS[operation],
        deadline: feed.deadline,
        resolution,
        quarantine: invalid === 'quarantine',
        onAttempt: (retry) => {
          stats.posts++;
          if (retry) stats.retries++;
        },
        traceparent: feed.traceparent,
        idempotencyKey: chunkKey(pending, feed.places),
      },
    );
    if (!(await settled(feed, pending, outcome, used))) return;
  }
}

/**
 * Enters an answer for the chunk's messages; true when what is left is to be posted again.
 * @param {Feed} feed @param {Item[]} pending @param {PostOutcome} outcome
 * @param {FeederConfig} used  the post's, token included @returns {Promise<boolean>}
 */
async function settled(feed, pending, outcome, used) {
  switch (outcome.kind) {
    case 'stored':
      countStored(feed.stats, pending, outcome);
      return false;
    case 'invalid':
      return failInvalid(feed, pending, outcome.errors);
    case 'tooLarge':
      await halve(feed, pending);
      return false;
    case 'refused':
      // A refused token is the deployment's fault, not the message's: unavailable, never poison.
      if (outcome.status === 401 && (await feed.tokens.newerToken(used))) return true;
      if (outcome.status === 401 || outcome.status === 403) {
        feed.credentialsRefused?.(outcome.status, pending[0].operation);
        failAll(feed, pending, { kind: 'unavailable', reason: outcome.reason });
        return false;
      }
      await splitByMessage(feed, pending, outcome.reason);
      return false;
    case 'unavailable':
      failAll(feed, pending, { kind: 'unavailable', reason: outcome.reason });
      return false;
  }
}

/**
 * @param {FeedStats} stats @param {Item[]} pending
 * @param {Extract<PostOutcome, { kind: 'stored' }>} outcome
 */
function countStored(stats, pending, outcome) {
  const sent = pending.length;
  if (pending[0].operation === 'erase') {
    stats.erasures += sent;
    // An earlier delivery's erasure: counted by the invocation that made it.
    if (outcome.replayed) return;
    stats.erased += outcome.erased ?? 0;
    stats.absent += outcome.absent ?? 0;
    return;
  }
  // The users set aside are the service's to keep (npm run quarantine): the message is done.
  stats.stored += sent - outcome.quarantined;
  // An earlier delivery's write: counted by the invocation that made it.
  if (outcome.replayed) {
    stats.replayed += sent - outcome.quarantined;
    return;
  }
  stats.inserted += outcome.inserted;
  stats.updated += outcome.updated;
  stats.stale += outcome.stale;
  stats.quarantined += outcome.quarantined;
}

/**
 * A 400 fails the messages of the users it names; true when the rest is to be posted again.
 * @param {Feed} feed @param {Item[]} pending
 * @param {import('./service-client.js').ItemError[]} errors @returns {Promise<boolean>}
 */
async function failInvalid(feed, pending, errors) {
  if (errors.length === 0) {
    await splitByMessage(feed, pending, 'HTTP 400 invalid_batch naming no user');
    return false;
  }
  // An index outside the chunk (a proxy, another version): posting it again gets the same answer.
  const outside = errors.find((e) => !(e.index >= 0 && e.index < pending.length));
  if (outside) {
    const why =
      `HTTP 400 invalid_batch naming ` + `user ${outside.index} of a chunk of ${pending.length}`;
    failAll(feed, pending, poison(why));
    return false;
  }
  for (const e of errors) {
    const why = `HTTP 400 invalid_batch: ${e.field ?? 'a user'} ${e.message}`;
    feed.ledger.fail(pending[e.index].messageId, poison(why));
  }
  return true;
}

/** @param {Feed} feed @param {Item[]} pending */
async function halve(feed, pending) {
  if (pending.length === 1) {
    feed.ledger.fail(
      pending[0].messageId,
      poison("one user is over the service's body limit (413)"),
    );
    return;
  }
  const half = Math.ceil(pending.length / 2);
  await feedChunk(feed, pending.slice(0, half));
  await feedChunk(feed, pending.slice(half));
}

/** @param {Feed} feed @param {Item[]} pending @param {string} reason */
async function splitByMessage(feed, pending, reason) {
  const ids = [...new Set(pending.map((item) => item.messageId))];
  if (ids.length === 1) return feed.ledger.fail(ids[0], poison(reason));
  const first = new Set(ids.slice(0, Math.ceil(ids.length / 2)));
  await feedChunk(
    feed,
    pending.filter((item) => first.has(item.messageId)),
  );
  await feedChunk(
    feed,
    pending.filter((item) => !first.has(item.messageId)),
  );
}

/** @param {Feed} feed @param {Item[]} pending @param {Failure} failure */
function failAll(feed, pending, failure) {
  for (const item of pending) feed.ledger.fail(item.messageId, failure);
}

/**
 * `concurrency` chunks at a time, in order; a chunk waits for earlier ones that share a group.
 * @param {Item[][]} chunks @param {number} concurrency
 * @param {(chunk: Item[]) => Promise<void>} feedChunk
 */
async function feedInGroupOrder(chunks, concurrency, feedChunk) {
  const groups = chunks.map(
    (chunk) => new Set(chunk.flatMap((item) => (item.group === undefined ? [] : [item.group]))),
  );
  /** @type {Promise<void>[]} */
  const fed = [];
  /** @param {number} i */
  function feedInTurn(i) {
    const earlier = fed.filter((_, j) => [...groups[j]].some((group) => groups[i].has(group)));
    // Chunks start in order, so every chunk waited for has started: no chunk waits for a later one.
    fed[i] = Promise.allSettled(earlier).then(() => feedChunk(chunks[i]));
    return fed[i];
  }
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, chunks.length) }, async () => {
      while (next < chunks.length) await feedInTurn(next++);
    }),
  );
}

/**
 * Which messages were not stored (or erased) whole. A 400 fails the messages it names, a 413
 * halves, another refusal that is no outage bisects by message. Each run of one operation is
 * applied whole before the next starts, so an erasure never overtakes an earlier write, nor a write
 * an earlier erasure; a failed message holds its group's later ones in the ledger, runs included.
 * @param {import('./records.js').SqsRecordLike[]} records @param {FeedOptions} options
 */
export async function feedRecords(records, options) {
  const { config } = options;
  const { items, poisoned } = unpackRecords(
    records,
    config.conflictResolution,
    config.invalidUsers,
  );
  /** @type {FeedStats} */
  const stats = {
    posts: 0,
    retries: 0,
    inserted: 0,
    updated: 0,
    stale: 0,
    stored: 0,
    quarantined: 0,
    replayed: 0,
    erasures: 0,
    erased: 0,
    absent: 0,
  };
  const ledger = createFailureLedger(records);
  for (const [messageId, failure] of poisoned) ledger.fail(messageId, failure);
  /** @type {Feed} */
  const feed = {
    ...options,
    ledger,
    tokens: tokenKeeper(config, options.rereadToken),
    stats,
    places: placesInMessages(items),
  };
  let erasures = 0;
  for (const run of runsOf(items)) {
    if (run[0].operation === 'erase') erasures += run.length;
    const chunks = chunksOf(run, config.postChunkItems, ledger.fifo);
    await feedInGroupOrder(chunks, config.postConcurrency, (chunk) => feedChunk(feed, chunk));
  }
  return { users: items.length - erasures, erasures, failed: ledger.failures(), stats };
}
