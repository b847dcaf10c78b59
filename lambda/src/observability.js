import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';

/** Once a cold start; Powertools' own POWERTOOLS_ variables apply. */
export function createPowertools() {
  return {
    logger: new Logger({ serviceName: 'sluice-feeder' }),
    metrics: new Metrics({ namespace: 'sluice', serviceName: 'sluice-feeder' }),
  };
}

/** @typedef {Pick<Logger, 'info' | 'warn' | 'error' | 'setCorrelationId'>} FeederLogger */
/** @typedef {Pick<Metrics, 'addMetric' | 'publishStoredMetrics'>} FeederMetrics */
/**
 * Counts only, never a user or the token. usersStored: inserted or already there; usersReplayed:
 * stored by an earlier delivery (not in inserted, updated, stale); erasures: those of erase
 * messages, erased and absent as the service counted them.
 * @typedef {{ requestId: string | undefined, records: number, users: number, usersStored: number,
 *   inserted: number, updated: number, stale: number, quarantined: number, usersReplayed: number,
 *   erasures: number, erased: number, absent: number, posts: number, retries: number,
 *   failedMessages: number, poisonMessages: number, heldMessages: number,
 *   durationMs: number }} InvocationReport
 */

/** Failed messages listed in one log line; the rest are counted. */
const LISTED_FAILURES = 20;

/** @param {{ logger: FeederLogger, metrics: FeederMetrics }} powertools */
export function createReports({ logger, metrics }) {
  return {
    reportInvocation,
    reportFailures,
    /** @param {Parameters<typeof reportCredentialsRefused>[1]} refusal */
    reportCredentialsRefused: (refusal) => reportCredentialsRefused(logger, refusal),
    reportErasureForbidden: () => reportErasureForbidden(logger),
  };

  /** The request id as correlation id, and one EMF record. @param {InvocationReport} report */
  function reportInvocation({ requestId, ...counts }) {
    logger.setCorrelationId(requestId);
    logger.info('sqs batch fed', counts);

    metrics.addMetric('usersStored', MetricUnit.Count, counts.usersStored);
    metrics.addMetric('usersUpdated', MetricUnit.Count, counts.updated);
    metrics.addMetric('usersStale', MetricUnit.Count, counts.stale);
    metrics.addMetric('usersQuarantined', MetricUnit.Count, counts.quarantined);
    metrics.addMetric('usersErased', MetricUnit.Count, counts.erased);
    metrics.addMetric('erasuresAbsent', MetricUnit.Count, counts.absent);
    metrics.addMetric('messagesFailed', MetricUnit.Count, counts.failedMessages);
    metrics.addMetric('poisonMessages', MetricUnit.Count, counts.poisonMessages);
    metrics.addMetric('heldMessages', MetricUnit.Count, counts.heldMessages);
    metrics.addMetric('retries', MetricUnit.Count, counts.retries);
    metrics.addMetric('posts', MetricUnit.Count, counts.posts);
    metrics.addMetric('durationMs', MetricUnit.Milliseconds, counts.durationMs);
    metrics.publishStoredMetrics();
  }

  /**
   * By id, kind and reason (never a user), to find each in the dead-letter queue and the log.
   * @param {Map<string, { kind: string, reason: string }>} failures
   */
  function reportFailures(failures) {
    const listed = [...failures]
      .slice(0, LISTED_FAILURES)
      .map(([messageId, f]) => ({ messageId, kind: f.kind, reason: f.reason }));
    logger.warn('messages not stored', {
      failures: listed,
      notListed: Math.max(0, failures.size - LISTED_FAILURES),
    });
  }
}

/**
 * A 401 or 403: what to set, never the token; without it a wrong token looks like a slow queue.
 * @param {FeederLogger} logger
 * @param {{ status: number, tokenSent: boolean, fromSecret: boolean }} refusal
 */
function reportCredentialsRefused(logger, { status, tokenSent, fromSecret }) {
  const what = tokenSent
    ? `refused the feeder's bearer token (HTTP ${status})`
    : `refused the feeder (HTTP ${status}): it wants a bearer token and the feeder sends none`;
  const fix = fromSecret
    ? "Put the service's INGEST_TOKEN into the Secrets Manager " +
      'secret INGEST_TOKEN_SECRET_ARN names (read at a cold start)'
    : "Set the feeder's INGEST_TOKEN to the service's INGEST_TOKEN and start it again";
  logger.error(
    `the service ${what}. ${fix}; until then no message is stored, ` +
      `and each returns to the queue after its visibility timeout`,
    { status, tokenSent },
  );
}

/**
 * A 403 at /erasures with a token sent: its client may not erase (a right apart from writing).
 * Without it, erase messages look like a slow queue. @param {FeederLogger} logger
 */
function reportErasureForbidden(logger) {
  logger.error(
    "the service refused the feeder's erasures (HTTP 403): its client may not erase. " +
      'Give it the right to erase ("erase": true beside its token in INGEST_TOKENS, ' +
      'or a JWT that grants it: docs/api.md); until then no erase message is applied, ' +
      'and each returns to the queue after its visibility timeout',
    { status: 403, operation: 'erase' },
  );
}
