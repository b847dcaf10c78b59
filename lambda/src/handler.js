import { toBatchItemFailures } from './batch-response.js';
import { loadFeederConfig } from './config.js';
import { ServiceUnavailableError } from './errors.js';
import { withIngestToken } from './ingest-token.js';
import { heldBehind, laterInGroup, withHeldFollowers } from './message-groups.js';
import { reportCredentialsRefused, reportFailures, reportInvocation } from './observability.js';
import { unpackRecords } from './records.js';
import { postUsers } from './service-client.js';
import { endInvocationSpan, loadTracing, runInSpan, startInvocationSpan } from './tracing.js';

/** @typedef {import('./records.js').Item} Item */
/**
 * Why a message was not stored: poison (it will never be: bad JSON, a user the service refuses, a
 * failure of its own), unavailable (the service could not be reached: it may be later), or held
 * (on a FIFO queue, an earlier message of its group failed: it must come back after that one). The
 * reason names the rule or the error id, never a user.
 * @typedef {{ kind: 'poison' | 'unavailable' | 'held', reason: string }} Failure
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
 * @param {import('./config.js').FeederConfig} config
 * @param {number} deadline  epoch ms after which no request starts
 * @param {{ rereadToken?: () => Promise<import('./config.js').FeederConfig> }} [options]
 */
export async function feedRecords(records, config, deadline, { rereadToken } = {}) {
  const { items, poisoned } = unpackRecords(records, config.conflictResolution);
  /** The configuration posts use: its token replaced when read again. */
  let current = config;
  /** @type {Promise<void> | undefined} */
  let reread;
  /**
   * Whether a chunk refused with `used` may be posted again: the token is read again (once) and
   * differs from the one the chunk was refused with.
   * @param {import('./config.js').FeederConfig} used
   */
  const newerToken = async (used) => {
    if (!rereadToken) return false;
    // A failed read leaves the token as it was: the chunk then fails as unavailable.
    reread ??= rereadToken().then((fresh) => void (current = fresh), () => undefined);
    await reread;
    return current.ingestToken !== used.ingestToken;
  };
  /** @type {Map<string, Failure>} */
  const failed = new Map([...poisoned].map(([id, err]) => [id, /** @type {Failure} */ ({ kind: 'poison', reason: err.message })]));
  const stats = { posts: 0, retries: 0, inserted: 0, updated: 0, stale: 0, stored: 0 };
  const later = laterInGroup(records);
  /** @param {string} id @param {Failure} failure */
  const fail = (id, failure) => {
    if (failed.get(id)?.kind !== 'poison') failed.set(id, failure);
    // FIFO: the group's later messages wait for this one; none of them is posted from now on.
    for (const next of later.get(id) ?? []) if (!failed.has(next)) failed.set(next, heldBehind(id));
  };
  // Poison found while unpacking holds back its group's later messages before anything is posted.
  for (const [id, failure] of [...failed]) fail(id, failure);

  /** @param {Item[]} chunk */
  async function feedChunk(chunk) {
    let pending = chunk;
    for (;;) {
      // A message already failed elsewhere fails whole: its other users need not be sent now.
      pending = pending.filter((item) => !failed.has(item.messageId));
      if (pending.length === 0) return;
      const used = current;
      const outcome = await postUsers(used, pending.map((item) => item.user), {
        deadline,
        resolution: pending[0].resolution,
        onAttempt: (retry) => {
          stats.posts++;
          if (retry) stats.retries++;
        },
      });
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
          if (outcome.status === 401 && (await newerToken(used))) continue;
          if (outcome.status === 401 || outcome.status === 403) {
            credentialsRefused(outcome.status, config);
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

  /** @param {Item[]} pending @param {Failure} failure */
  const failAll = (pending, failure) => pending.forEach((item) => fail(item.messageId, failure));

  const fifo = later.size > 0;
  const chunks = fifo ? chunksInOrder(items, config.postChunkItems) : chunksOf(items, config.postChunkItems);
  // FIFO: the chunks each chunk must wait for (an earlier one sharing a message group with it).
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
    Array.from({ length: Math.min(config.postConcurrency, chunks.length) }, async () => {
      while (next < chunks.length) await feedInTurn(next++);
    }),
  );
  // The rule, whatever the order failures were found in: a group fails from its first failure on.
  return { items, failed: fifo ? withHeldFollowers(records, failed) : failed, stats };
}

/** Said once per execution environment: every batch after it is refused the same way. */
let credentialsRefusedSaid = false;

/**
 * The service refused the feeder's credentials: an operator's fix, said clearly once (what to set,
 * never the token), rather than only as a reason among the failed messages of every invocation.
 * @param {number} status @param {import('./config.js').FeederConfig} config
 */
function credentialsRefused(status, config) {
  if (credentialsRefusedSaid) return;
  credentialsRefusedSaid = true;
  reportCredentialsRefused({ status, tokenSent: Boolean(config.ingestToken), fromSecret: Boolean(config.ingestTokenSecretArn) });
}

/** @type {import('./config.js').FeederConfig | undefined} */
let config;
/** @type {Promise<void> | undefined} */
let tracingLoaded;

/**
 * The Lambda handler for an SQS event source with ReportBatchItemFailures.
 * @param {{ Records: (import('./records.js').SqsRecordLike & import('./tracing.js').TracedRecord)[] }} event
 * @param {{ getRemainingTimeInMillis: () => number, awsRequestId?: string }} context
 */
export async function handler(event, context) {
  config ??= await withIngestToken(loadFeederConfig());
  await (tracingLoaded ??= loadTracing());
  const started = Date.now();
  const deadline = started + context.getRemainingTimeInMillis() - config.safetyMarginMs;
  const records = event.Records ?? [];
  const span = startInvocationSpan(records, context);
  let fed;
  try {
    const feederConfig = config;
    // A rotated token: read again on a 401, and kept for the next invocations once read.
    const rereadToken = async () => (config = await withIngestToken(feederConfig));
    fed = await runInSpan(span, () => feedRecords(records, feederConfig, deadline, { rereadToken }));
  } catch (err) {
    endInvocationSpan(span, {}, err);
    throw err;
  }
  const { items, failed, stats } = fed;
  endInvocationSpan(span, { users: items.length, users_stored: stats.stored, posts: stats.posts, retries: stats.retries, failed_messages: failed.size });

  const failures = [...failed.values()];
  reportInvocation({
    requestId: context.awsRequestId,
    records: records.length,
    users: items.length,
    usersStored: stats.stored,
    inserted: stats.inserted,
    updated: stats.updated,
    stale: stats.stale,
    posts: stats.posts,
    retries: stats.retries,
    failedMessages: failed.size,
    poisonMessages: failures.filter((f) => f.kind === 'poison').length,
    heldMessages: failures.filter((f) => f.kind === 'held').length,
    durationMs: Date.now() - started,
  });
  if (failed.size > 0) reportFailures(failed);

  // Held messages follow an earlier failure of their group; with no poison, that was an outage too.
  if (records.length > 0 && failed.size === records.length && failures.every((f) => f.kind !== 'poison')) {
    throw new ServiceUnavailableError(`the service could not take any of ${records.length} messages; the batch goes back to the queue`);
  }
  return toBatchItemFailures(failed.keys());
}
