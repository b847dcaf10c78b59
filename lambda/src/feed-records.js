import { heldBehind, laterInGroup, withHeldFollowers } from './message-groups.js';
import { unpackRecords } from './records.js';

/** @typedef {import('./records.js').Item} Item */
/** @typedef {import('./config.js').FeederConfig} FeederConfig */
/**
 * Why a message was not stored: poison (it will never be: bad JSON, a user the service refuses, a
 * failure of its own), unavailable (the service could not be reached: it may be later), or held
 * (on a FIFO queue, an earlier message of its group failed: it must come back after that one). The
 * reason names the rule or the error id, never a user.
 * @typedef {{ kind: 'poison' | 'unavailable' | 'held', reason: string }} Failure
 */
/** @typedef {{ posts: number, retries: number, inserted: number, updated: number, stale: number, stored: number }} FeedStats */
/**
 * What feedRecords needs besides the batch.
 * @typedef {object} FeedOptions
 * @property {FeederConfig} config  the configuration, token included, the invocation started with
 * @property {number} deadline  epoch ms after which no request starts
 * @property {typeof import('./service-client.js').postUsers} postUsers
 * @property {() => string | undefined} [traceparent]  the header for a request made now
 * @property {() => Promise<FeederConfig>} [rereadToken]  the configuration with its token read again
 * @property {(status: number) => void} [credentialsRefused]  the service refused the credentials (401, 403)
 */

/**
 * The items in chunks of at most `size`, each of one resolution (a POST has one Prefer header).
 * @param {Item[]} items @param {number} size
 */
function chunksOf(items, size) {
  /** @type {Item[][]} */
  const chunks = [];
  for (const resolution of ['ignore', 'merge']) {
    const same = items.filter((item) => item.resolution === resolution);
    for (let i = 0; i < same.length; i += size) chunks.push(same.slice(i, i + size));
  }
  return chunks;
}

/**
 * A FIFO batch's items in chunks of at most `size`, in the batch's order: a new chunk starts when
 * the resolution changes, so no message overtakes an earlier one of its group (the service applies
 * one request's users in order).
 * @param {Item[]} items @param {number} size
 */
function chunksInOrder(items, size) {
  /** @type {Item[][]} */
  const chunks = [];
  for (const item of items) {
    const last = chunks.at(-1);
    if (last && last.length < size && last[0].resolution === item.resolution) last.push(item);
    else chunks.push([item]);
  }
  return chunks;
}

/**
 * The batch's failed messages, and the one way to add to them: a failure never replaces poison,
 * and on a FIFO queue it holds back the later messages of its group (none of them is posted from
 * then on).
 * @param {import('./records.js').SqsRecordLike[]} records @param {Map<string, Error>} poisoned
 */
function failureLedger(records, poisoned) {
  /** @type {Map<string, Failure>} */
  const failed = new Map([...poisoned].map(([id, err]) => [id, /** @type {Failure} */ ({ kind: 'poison', reason: err.message })]));
  const later = laterInGroup(records);
  /** @param {string} id @param {Failure} failure */
  const fail = (id, failure) => {
    if (failed.get(id)?.kind !== 'poison') failed.set(id, failure);
    for (const next of later.get(id) ?? []) if (!failed.has(next)) failed.set(next, heldBehind(id));
  };
  // Poison found while unpacking holds back its group's later messages before anything is posted.
  for (const [id, failure] of [...failed]) fail(id, failure);
  return { failed, fail, fifo: later.size > 0 };
}

/**
 * The configuration posts use, its token replaced when read again: `newerToken(used)` says
 * whether a chunk refused with `used` may be posted again, the token read (once per invocation,
 * shared by the chunks in flight) and different from the one the chunk was refused with.
 * @param {FeederConfig} config @param {(() => Promise<FeederConfig>) | undefined} rereadToken
 */
function tokenKeeper(config, rereadToken) {
  let current = config;
  /** @type {Promise<void> | undefined} */
  let reread;
  return {
    current: () => current,
    /** @param {FeederConfig} used */
    async newerToken(used) {
      if (!rereadToken) return false;
      // A failed read leaves the token as it was: the chunk then fails as unavailable.
      reread ??= rereadToken().then((fresh) => void (current = fresh), () => undefined);
      await reread;
      return current.ingestToken !== used.ingestToken;
    },
  };
}

/**
 * The function that feeds one chunk, and what the service's answer to it means for its messages:
 * stored; a refused user fails its message and the rest is posted again; too large, halved; a
 * refusal that is not an outage, split by message until the guilty one is alone; an outage, or a
 * refused token (read again once first, on a 401), fails the chunk's messages as unavailable.
 * @param {FeedOptions & { ledger: ReturnType<typeof failureLedger>, tokens: ReturnType<typeof tokenKeeper>, stats: FeedStats }} feed
 */
function chunkFeeder({ ledger, tokens, stats, deadline, postUsers, traceparent, credentialsRefused = () => {} }) {
  const { failed, fail } = ledger;
  /** @param {Item[]} pending @param {Failure} failure */
  const failAll = (pending, failure) => pending.forEach((item) => fail(item.messageId, failure));
  const onAttempt = (/** @type {boolean} */ retry) => {
    stats.posts++;
    if (retry) stats.retries++;
  };

  /** @param {Item[]} chunk @returns {Promise<void>} */
  async function feedChunk(chunk) {
    let pending = chunk;
    for (;;) {
      // A message already failed elsewhere fails whole: its other users need not be sent now.
      pending = pending.filter((item) => !failed.has(item.messageId));
      if (pending.length === 0) return;
      const used = tokens.current();
      const outcome = await postUsers(used, pending.map((item) => item.user), { deadline, resolution: pending[0].resolution, onAttempt, traceparent });
      switch (outcome.kind) {
        case 'stored':
          stats.inserted += outcome.inserted;
          stats.updated += outcome.updated;
          stats.stale += outcome.stale;
          stats.stored += pending.length;
          return;
        case 'invalid':
          // Each refused user fails its message; the rest of the chunk is posted again.
          if (outcome.errors.length === 0) return splitByMessage(pending, 'HTTP 400 invalid_batch naming no user');
          for (const e of outcome.errors) {
            const item = pending[e.index];
            if (item) fail(item.messageId, { kind: 'poison', reason: `HTTP 400 invalid_batch: ${e.field ?? 'a user'} ${e.message}` });
          }
          continue;
        case 'tooLarge': {
          if (pending.length === 1) return fail(pending[0].messageId, { kind: 'poison', reason: 'one user is over the service\'s body limit (413)' });
          const half = Math.ceil(pending.length / 2);
          await feedChunk(pending.slice(0, half));
          return feedChunk(pending.slice(half));
        }
        case 'refused':
          // A refused token is the deployment's fault, not the message's: it must not send good
          // users to the dead-letter queue, so it counts as unavailable and the messages come back.
          if (outcome.status === 401 && (await tokens.newerToken(used))) continue;
          if (outcome.status === 401 || outcome.status === 403) {
            credentialsRefused(outcome.status);
            return failAll(pending, { kind: 'unavailable', reason: outcome.reason });
          }
          return splitByMessage(pending, outcome.reason);
        case 'unavailable':
          return failAll(pending, { kind: 'unavailable', reason: outcome.reason });
      }
    }
  }

  /**
   * Bisects a refused chunk along message boundaries; a message alone that is still refused fails.
   * @param {Item[]} pending @param {string} reason
   */
  async function splitByMessage(pending, reason) {
    const ids = [...new Set(pending.map((item) => item.messageId))];
    if (ids.length === 1) return fail(ids[0], { kind: 'poison', reason });
    const first = new Set(ids.slice(0, Math.ceil(ids.length / 2)));
    await feedChunk(pending.filter((item) => first.has(item.messageId)));
    await feedChunk(pending.filter((item) => !first.has(item.messageId)));
  }

  return feedChunk;
}

/**
 * Feeds the chunks, `concurrency` at a time, in order; on a FIFO queue a chunk waits while an
 * earlier one that shares a message group with it is still being fed.
 * @param {Item[][]} chunks @param {number} concurrency @param {(chunk: Item[]) => Promise<void>} feedChunk
 */
async function feedInGroupOrder(chunks, concurrency, feedChunk) {
  const groups = chunks.map((chunk) => new Set(chunk.flatMap((item) => (item.group === undefined ? [] : [item.group]))));
  /** @type {Promise<void>[]} each chunk's feeding, once it started */
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
 * Posts every user of the batch in chunks, several at once, and works out which messages were
 * not stored whole. A chunk the service refuses names its bad users (400) and only their messages
 * fail; one refused for another reason that is not an outage (its own 500, a 4xx) is split by
 * message, halves posted apart, until the message that holds the bad user is alone: it fails, and
 * every other message is stored.
 *
 * On a FIFO queue (records with a MessageGroupId) a group's messages are posted in order: chunks
 * follow the batch's order, and a chunk waits while an earlier one that holds a message of one of
 * its groups is still being fed. A failed message holds back every later message of its group: they
 * are not posted (or no more), and are reported as failed even if they were stored, so that SQS
 * hands them back after it (message-groups.js).
 *
 * A 401 may mean the token was rotated since it was read: the token is read again (`rereadToken`,
 * once per invocation, shared by the chunks in flight) and a chunk refused with the old one is
 * posted again with the new one. Refused again, or with the token unchanged, the chunk's messages
 * fail as unavailable (never poison: a token is the deployment's fault, not the message's).
 *
 * @param {import('./records.js').SqsRecordLike[]} records
 * @param {FeedOptions} options
 */
export async function feedRecords(records, options) {
  const { config } = options;
  const { items, poisoned } = unpackRecords(records, config.conflictResolution);
  /** @type {FeedStats} */
  const stats = { posts: 0, retries: 0, inserted: 0, updated: 0, stale: 0, stored: 0 };
  const ledger = failureLedger(records, poisoned);
  const feedChunk = chunkFeeder({ ...options, ledger, tokens: tokenKeeper(config, options.rereadToken), stats });
  const chunks = ledger.fifo ? chunksInOrder(items, config.postChunkItems) : chunksOf(items, config.postChunkItems);
  await feedInGroupOrder(chunks, config.postConcurrency, feedChunk);
  // The rule, whatever the order failures were found in: a group fails from its first failure on.
  return { items, failed: ledger.fifo ? withHeldFollowers(records, ledger.failed) : ledger.failed, stats };
}
