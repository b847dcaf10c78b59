import { toBatchItemFailures } from './batch-response.js';
import { loadFeederConfig } from './config.js';
import { ServiceUnavailableError } from './errors.js';
import { withIngestToken } from './ingest-token.js';
import { reportInvocation } from './observability.js';
import { unpackRecords } from './records.js';
import { postUsers } from './service-client.js';

/** @typedef {import('./records.js').Item} Item */
/** @typedef {'poison' | 'unavailable'} FailureKind */

/**
 * Posts every user of the batch in chunks, several at once, and works out which messages were
 * not stored whole.
 *
 * @param {import('./records.js').SqsRecordLike[]} records
 * @param {import('./config.js').FeederConfig} config
 * @param {number} deadline  epoch ms after which no request starts
 */
export async function feedRecords(records, config, deadline) {
  const { items, poisoned } = unpackRecords(records);
  /** @type {Map<string, FailureKind>} */
  const failed = new Map([...poisoned.keys()].map((id) => [id, /** @type {FailureKind} */ ('poison')]));
  const stats = { posts: 0, retries: 0, inserted: 0, stored: 0 };
  const fail = (/** @type {string} */ id, /** @type {FailureKind} */ kind) => {
    if (failed.get(id) !== 'poison') failed.set(id, kind);
  };

  /** @param {Item[]} chunk */
  async function feedChunk(chunk) {
    let pending = chunk;
    for (;;) {
      // A message already failed elsewhere fails whole: its other users need not be sent now.
      pending = pending.filter((item) => !failed.has(item.messageId));
      if (pending.length === 0) return;
      const outcome = await postUsers(config, pending.map((item) => item.user), {
        deadline,
        onAttempt: (retry) => {
          stats.posts++;
          if (retry) stats.retries++;
        },
      });
      switch (outcome.kind) {
        case 'stored':
          stats.inserted += outcome.inserted;
          stats.stored += pending.length;
          return;
        case 'invalid':
          // Each refused user fails its message; the rest of the chunk is posted again.
          if (outcome.indexes.length === 0) return pending.forEach((item) => fail(item.messageId, 'poison'));
          for (const index of outcome.indexes) if (pending[index]) fail(pending[index].messageId, 'poison');
          continue;
        case 'tooLarge': {
          if (pending.length === 1) return fail(pending[0].messageId, 'poison');
          const half = Math.ceil(pending.length / 2);
          await feedChunk(pending.slice(0, half));
          return feedChunk(pending.slice(half));
        }
        case 'rejected':
          // A refused token is the deployment's fault, not the message's: it must not send good
          // users to the dead-letter queue, so it counts as unavailable and the messages come back.
          return pending.forEach((item) => fail(item.messageId, outcome.status === 401 || outcome.status === 403 ? 'unavailable' : 'poison'));
        case 'unavailable':
          return pending.forEach((item) => fail(item.messageId, 'unavailable'));
      }
    }
  }

  const chunks = [];
  for (let i = 0; i < items.length; i += config.postChunkItems) chunks.push(items.slice(i, i + config.postChunkItems));
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(config.postConcurrency, chunks.length) }, async () => {
      while (next < chunks.length) await feedChunk(chunks[next++]);
    }),
  );
  return { items, failed, stats };
}

/** @type {import('./config.js').FeederConfig | undefined} */
let config;

/**
 * The Lambda handler for an SQS event source with ReportBatchItemFailures.
 * @param {{ Records: import('./records.js').SqsRecordLike[] }} event
 * @param {{ getRemainingTimeInMillis: () => number, awsRequestId?: string }} context
 */
export async function handler(event, context) {
  config ??= await withIngestToken(loadFeederConfig());
  const started = Date.now();
  const deadline = started + context.getRemainingTimeInMillis() - config.safetyMarginMs;
  const records = event.Records ?? [];
  const { items, failed, stats } = await feedRecords(records, config, deadline);

  const kinds = [...failed.values()];
  reportInvocation({
    requestId: context.awsRequestId,
    records: records.length,
    users: items.length,
    usersStored: stats.stored,
    inserted: stats.inserted,
    posts: stats.posts,
    retries: stats.retries,
    failedMessages: failed.size,
    poisonMessages: kinds.filter((k) => k === 'poison').length,
    durationMs: Date.now() - started,
  });

  if (records.length > 0 && failed.size === records.length && kinds.every((k) => k === 'unavailable')) {
    throw new ServiceUnavailableError(`the service could not take any of ${records.length} messages; the batch goes back to the queue`);
  }
  return toBatchItemFailures(failed.keys());
}
