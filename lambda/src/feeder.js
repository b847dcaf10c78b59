import { toBatchItemFailures } from './batch-response.js';
import { ServiceUnavailableError } from './errors.js';
import { feedRecords } from './feed-records.js';
import { createReports } from './observability.js';
import { postBatch as postBatchOverHttp } from './service-client.js';
import { NO_TRACING } from './tracing.js';

/** @typedef {import('./config.js').FeederConfig} FeederConfig */
/**
 * @typedef {{ Records?: (import('./records.js').SqsRecordLike
 *   & import('./tracing.js').TracedRecord)[] }} SqsEvent
 */
/** @typedef {{ getRemainingTimeInMillis: () => number, awsRequestId?: string }} LambdaContext */
/**
 * @typedef {(event: SqsEvent, context: LambdaContext) =>
 *   Promise<{ batchItemFailures: { itemIdentifier: string }[] }>} SqsHandler
 */

/**
 * readToken: the configuration with its token, at the first invocation and on a 401.
 * @typedef {{ config: FeederConfig, readToken?: (config: FeederConfig) => Promise<FeederConfig>,
 *   logger: import('./observability.js').FeederLogger,
 *   metrics: import('./observability.js').FeederMetrics,
 *   tracing?: import('./tracing.js').FeederTracing,
 *   postBatch?: typeof postBatchOverHttp }} FeederParts
 */

/**
 * What the handler keeps between invocations lives in it, not in a module.
 * @param {FeederParts} parts @returns {SqsHandler}
 */
export function createFeeder({
  config,
  readToken = async (loaded) => loaded,
  logger,
  metrics,
  tracing = NO_TRACING,
  postBatch = postBatchOverHttp,
}) {
  const reports = createReports({ logger, metrics });
  const refusals = refusalsSaidOnce(reports);
  /** @type {FeederConfig | undefined} */
  let current = undefined;

  return async function handler(event, context) {
    current ??= await readToken(config);
    const started = Date.now();
    const deadline = started + context.getRemainingTimeInMillis() - current.safetyMarginMs;
    const records = event.Records ?? [];
    const span = tracing.startInvocationSpan(records, context);
    let fed;
    try {
      const invocationConfig = current;
      // A token read again on a 401 is kept for the next invocations.
      const rereadToken = async () => (current = await readToken(invocationConfig));
      fed = await tracing.runInSpan(span, () =>
        feedRecords(records, {
          config: invocationConfig,
          deadline,
          postBatch,
          traceparent: tracing.currentTraceparent,
          rereadToken,
          credentialsRefused: (status, operation) =>
            refusals.refused(status, invocationConfig, operation),
        }),
      );
    } catch (err) {
      tracing.endInvocationSpan(span, {}, err);
      throw err;
    }
    const { failed, stats } = fed;
    refusals.letIn(stats);
    tracing.endInvocationSpan(span, {
      users: fed.users,
      erasures: fed.erasures,
      users_stored: stats.stored,
      posts: stats.posts,
      retries: stats.retries,
      failed_messages: failed.size,
    });
    return answer(records, fed, {
      requestId: context.awsRequestId,
      durationMs: Date.now() - started,
      reports,
    });
  };
}

/**
 * A refused token, and a token that may write but not erase (a 403 at /erasures), each said once
 * until the service takes what it refused.
 * @param {ReturnType<typeof createReports>} reports
 */
function refusalsSaidOnce(reports) {
  let said = false;
  let eraseSaid = false;
  return {
    /**
     * @param {number} status @param {FeederConfig} used
     * @param {import('./records.js').Operation} operation
     */
    refused(status, used, operation) {
      const tokenSent = Boolean(used.ingestToken);
      if (operation === 'erase' && status === 403 && tokenSent) {
        if (!eraseSaid) reports.reportErasureForbidden();
        eraseSaid = true;
        return;
      }
      if (said) return;
      said = true;
      reports.reportCredentialsRefused({
        status,
        tokenSent,
        fromSecret: Boolean(used.ingestTokenSecretArn),
      });
    },
    /** @param {import('./feed-records.js').FeedStats} stats */
    letIn({ stored, erasures }) {
      if (stored > 0 || erasures > 0) said = false;
      if (erasures > 0) eraseSaid = false;
    },
  };
}

/**
 * The failed messages; all failed for an outage: a ServiceUnavailableError (Lambda backs off).
 * @param {unknown[]} records @param {Awaited<ReturnType<typeof feedRecords>>} fed
 * @param {{ requestId: string | undefined, durationMs: number,
 *   reports: ReturnType<typeof createReports> }} invocation
 */
function answer(records, fed, { requestId, durationMs, reports }) {
  const { failed, stats } = fed;
  const failures = [...failed.values()];
  reports.reportInvocation({
    requestId,
    records: records.length,
    users: fed.users,
    usersStored: stats.stored,
    inserted: stats.inserted,
    updated: stats.updated,
    stale: stats.stale,
    quarantined: stats.quarantined,
    usersReplayed: stats.replayed,
    erasures: fed.erasures,
    erased: stats.erased,
    absent: stats.absent,
    posts: stats.posts,
    retries: stats.retries,
    failedMessages: failed.size,
    poisonMessages: failures.filter((f) => f.kind === 'poison').length,
    heldMessages: failures.filter((f) => f.kind === 'held').length,
    durationMs,
  });
  if (failed.size > 0) reports.reportFailures(failed);

  // Held messages follow an earlier failure of their group; with no poison, that was an outage too.
  if (
    records.length > 0 &&
    failed.size === records.length &&
    failures.every((f) => f.kind !== 'poison')
  ) {
    throw new ServiceUnavailableError(
      `the service could not take any of ${records.length} messages; ` +
        `the batch goes back to the queue`,
    );
  }
  return toBatchItemFailures(failed.keys());
}
