import { toBatchItemFailures } from './batch-response.js';
import { ServiceUnavailableError } from './errors.js';
import { feedRecords } from './feed-records.js';
import { createReports } from './observability.js';
import { postUsers as postUsersOverHttp } from './service-client.js';
import { NO_TRACING } from './tracing.js';

/** @typedef {import('./config.js').FeederConfig} FeederConfig */
/** @typedef {{ Records?: (import('./records.js').SqsRecordLike & import('./tracing.js').TracedRecord)[] }} SqsEvent */
/** @typedef {{ getRemainingTimeInMillis: () => number, awsRequestId?: string }} LambdaContext */
/** @typedef {(event: SqsEvent, context: LambdaContext) => Promise<{ batchItemFailures: { itemIdentifier: string }[] }>} SqsHandler */

/**
 * What a feeder is made of. Everything it keeps between invocations lives in the feeder made from
 * these (the token once read, whether the refused credentials were said), not in a module.
 * @typedef {object} FeederParts
 * @property {FeederConfig} config  as loaded (loadFeederConfig), the token perhaps still to be read
 * @property {(config: FeederConfig) => Promise<FeederConfig>} [readToken]  the configuration with its token
 *   in place: read at the first invocation and again on a 401 (withIngestToken); by default the
 *   token given in the configuration
 * @property {import('./observability.js').FeederLogger} logger  Powertools' Logger (createPowertools)
 * @property {import('./observability.js').FeederMetrics} metrics  Powertools' Metrics
 * @property {import('./tracing.js').FeederTracing} [tracing]  NO_TRACING by default
 * @property {typeof postUsersOverHttp} [postUsers]  one POST /users with its retries (service-client.js)
 */

/**
 * The Lambda handler for an SQS event source with ReportBatchItemFailures, built from its parts
 * (as Powertools' BatchProcessor is built, then handed each batch): each invocation feeds the
 * batch to the service (feed-records.js), reports it (one log line, one EMF record, the failed
 * messages), and answers the messages to return to the queue, or throws when every message failed
 * for an outage, so that Lambda backs off.
 * @param {FeederParts} parts
 * @returns {SqsHandler}
 */
export function createFeeder({ config, readToken = async (loaded) => loaded, logger, metrics, tracing = NO_TRACING, postUsers = postUsersOverHttp }) {
  const reports = createReports({ logger, metrics });
  /** The configuration with its token: read at the first invocation, and again when a 401 asks. @type {FeederConfig | undefined} */
  let current;
  /** Said once while the refusals last (every batch after it is refused the same way); again after a batch was let in. */
  let credentialsRefusedSaid = false;

  /**
   * The service refused the feeder's credentials: an operator's fix, said clearly once (what to
   * set, never the token), rather than only as a reason among the failed messages of every invocation.
   * @param {number} status @param {FeederConfig} used
   */
  function credentialsRefused(status, used) {
    if (credentialsRefusedSaid) return;
    credentialsRefusedSaid = true;
    reports.reportCredentialsRefused({ status, tokenSent: Boolean(used.ingestToken), fromSecret: Boolean(used.ingestTokenSecretArn) });
  }

  return async function handler(event, context) {
    current ??= await readToken(config);
    const started = Date.now();
    const deadline = started + context.getRemainingTimeInMillis() - current.safetyMarginMs;
    const records = event.Records ?? [];
    const span = tracing.startInvocationSpan(records, context);
    let fed;
    try {
      const invocationConfig = current;
      // A rotated token: read again on a 401, and kept for the next invocations once read.
      const rereadToken = async () => (current = await readToken(invocationConfig));
      fed = await tracing.runInSpan(span, () => feedRecords(records, {
        config: invocationConfig, deadline, postUsers, traceparent: tracing.currentTraceparent, rereadToken,
        credentialsRefused: (status) => credentialsRefused(status, invocationConfig),
      }));
    } catch (err) {
      tracing.endInvocationSpan(span, {}, err);
      throw err;
    }
    const { items, failed, stats } = fed;
    // Let in again: a later refusal (another misconfiguration) is said again.
    if (stats.stored > 0) credentialsRefusedSaid = false;
    tracing.endInvocationSpan(span, { users: items.length, users_stored: stats.stored, posts: stats.posts, retries: stats.retries, failed_messages: failed.size });
    return answer(records, fed, { requestId: context.awsRequestId, durationMs: Date.now() - started, reports });
  };
}

/**
 * Reports what an invocation came to and answers Lambda: the failed messages, which return to the
 * queue; or, when every message failed for an outage, a ServiceUnavailableError.
 * @param {unknown[]} records
 * @param {Awaited<ReturnType<typeof feedRecords>>} fed
 * @param {{ requestId: string | undefined, durationMs: number, reports: ReturnType<typeof createReports> }} invocation
 */
function answer(records, { items, failed, stats }, { requestId, durationMs, reports }) {
  const failures = [...failed.values()];
  reports.reportInvocation({
    requestId,
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
    durationMs,
  });
  if (failed.size > 0) reports.reportFailures(failed);

  // Held messages follow an earlier failure of their group; with no poison, that was an outage too.
  if (records.length > 0 && failed.size === records.length && failures.every((f) => f.kind !== 'poison')) {
    throw new ServiceUnavailableError(`the service could not take any of ${records.length} messages; the batch goes back to the queue`);
  }
  return toBatchItemFailures(failed.keys());
}
