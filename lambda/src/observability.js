import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';

/**
 * The feeder's Powertools Logger and Metrics, made by the composition root once per cold start, as
 * Powertools expects. Powertools' own variables apply: POWERTOOLS_LOG_LEVEL,
 * POWERTOOLS_METRICS_DISABLED, POWERTOOLS_DEV.
 * @returns {{ logger: Logger, metrics: Metrics }}
 */
export function createPowertools() {
  return {
    logger: new Logger({ serviceName: 'sluice-feeder' }),
    metrics: new Metrics({ namespace: 'sluice', serviceName: 'sluice-feeder' }),
  };
}

/** What reports use of Powertools' Logger. @typedef {Pick<Logger, 'info' | 'warn' | 'error' | 'setCorrelationId'>} FeederLogger */
/** What reports use of Powertools' Metrics. @typedef {Pick<Metrics, 'addMetric' | 'publishStoredMetrics'>} FeederMetrics */

/**
 * @typedef {object} InvocationReport  counts only: never a user, never the token
 * @property {string | undefined} requestId
 * @property {number} records
 * @property {number} users
 * @property {number} usersStored      accepted by the service (inserted, or already there)
 * @property {number} inserted
 * @property {number} updated          stored users changed (merge mode)
 * @property {number} stale            merge mode: users that wrote nothing, no newer change than the row stored (changedAt)
 * @property {number} posts
 * @property {number} retries
 * @property {number} failedMessages
 * @property {number} poisonMessages
 * @property {number} heldMessages     FIFO: failed only because an earlier message of their group did
 * @property {number} durationMs
 */

/** At most this many failed messages are listed in one log line; the rest are counted. */
const LISTED_FAILURES = 20;

/**
 * The feeder's reports, through the logger and metrics it is handed.
 * @param {{ logger: FeederLogger, metrics: FeederMetrics }} powertools
 */
export function createReports({ logger, metrics }) {
  return { reportInvocation, reportFailures, reportCredentialsRefused };

  /**
   * One log line per invocation, with the request id as Powertools' correlation id, and one
   * CloudWatch embedded-metric-format (EMF) line with the invocation's figures.
   * @param {InvocationReport} report
   */
  function reportInvocation({ requestId, ...counts }) {
    logger.setCorrelationId(requestId);
    logger.info('sqs batch fed', counts);

    metrics.addMetric('usersStored', MetricUnit.Count, counts.usersStored);
    metrics.addMetric('usersUpdated', MetricUnit.Count, counts.updated);
    metrics.addMetric('usersStale', MetricUnit.Count, counts.stale);
    metrics.addMetric('messagesFailed', MetricUnit.Count, counts.failedMessages);
    metrics.addMetric('poisonMessages', MetricUnit.Count, counts.poisonMessages);
    metrics.addMetric('heldMessages', MetricUnit.Count, counts.heldMessages);
    metrics.addMetric('retries', MetricUnit.Count, counts.retries);
    metrics.addMetric('posts', MetricUnit.Count, counts.posts);
    metrics.addMetric('durationMs', MetricUnit.Milliseconds, counts.durationMs);
    metrics.publishStoredMetrics();
  }

  /**
   * Why messages failed: one warning line per invocation, each message by id with its kind and
   * reason (the service's rule for a refused user, or its error id for a 500): what an operator
   * needs to find it in the dead-letter queue and in the service's log. Never a user.
   * @param {Map<string, { kind: string, reason: string }>} failures
   */
  function reportFailures(failures) {
    const listed = [...failures].slice(0, LISTED_FAILURES).map(([messageId, f]) => ({ messageId, kind: f.kind, reason: f.reason }));
    logger.warn('messages not stored', { failures: listed, notListed: Math.max(0, failures.size - LISTED_FAILURES) });
  }

  /**
   * The service refused the feeder's credentials (401, 403): one error line saying so and what to
   * set, never the token itself. The messages are not stored and come back after the queue's
   * visibility timeout, so without this line a wrong token looks like a slow queue.
   * @param {{ status: number, tokenSent: boolean, fromSecret: boolean }} refusal
   */
  function reportCredentialsRefused({ status, tokenSent, fromSecret }) {
    const what = tokenSent
      ? `refused the feeder's bearer token (HTTP ${status})`
      : `refused the feeder (HTTP ${status}): it wants a bearer token and the feeder sends none`;
    const fix = fromSecret
      ? "Put the service's INGEST_TOKEN into the Secrets Manager secret INGEST_TOKEN_SECRET_ARN names (read at a cold start)"
      : "Set the feeder's INGEST_TOKEN to the service's INGEST_TOKEN and start it again";
    logger.error(`the service ${what}. ${fix}; until then no message is stored, and each returns to the queue after its visibility timeout`, { status, tokenSent });
  }
}
