import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';

// Created once per cold start, as Powertools expects. Powertools' own variables apply:
// POWERTOOLS_LOG_LEVEL, POWERTOOLS_METRICS_DISABLED, POWERTOOLS_DEV.
const logger = new Logger({ serviceName: 'sluice-feeder' });
const metrics = new Metrics({ namespace: 'sluice', serviceName: 'sluice-feeder' });

/**
 * @typedef {object} InvocationReport  counts only: never a user, never the token
 * @property {string | undefined} requestId
 * @property {number} records
 * @property {number} users
 * @property {number} usersStored      accepted by the service (inserted, or already there)
 * @property {number} inserted
 * @property {number} posts
 * @property {number} retries
 * @property {number} failedMessages
 * @property {number} poisonMessages
 * @property {number} durationMs
 */

/**
 * One log line per invocation, with the request id as Powertools' correlation id, and one
 * CloudWatch embedded-metric-format (EMF) line with the invocation's figures.
 * @param {InvocationReport} report
 */
export function reportInvocation({ requestId, ...counts }) {
  logger.setCorrelationId(requestId);
  logger.info('sqs batch fed', counts);

  metrics.addMetric('usersStored', MetricUnit.Count, counts.usersStored);
  metrics.addMetric('messagesFailed', MetricUnit.Count, counts.failedMessages);
  metrics.addMetric('poisonMessages', MetricUnit.Count, counts.poisonMessages);
  metrics.addMetric('retries', MetricUnit.Count, counts.retries);
  metrics.addMetric('posts', MetricUnit.Count, counts.posts);
  metrics.addMetric('durationMs', MetricUnit.Milliseconds, counts.durationMs);
  metrics.publishStoredMetrics();
}
