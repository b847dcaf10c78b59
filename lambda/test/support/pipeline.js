import { LocalEventSource } from '../../local/local-runner.js';
import { captureHandlerOutput } from './handler-output.js';

/**
 * The local runner with the real handler, pointed at a queue. The handler reads its configuration
 * from the environment on first use, so SERVICE_URL and friends are set here first.
 * @param {{ sqs: import('@aws-sdk/client-sqs').SQSClient, queueUrl: string, serviceUrl: string, env?: Record<string, string>,
 *   batchSize?: number, functionTimeoutMs?: number }} options
 */
export async function startFeeder({ sqs, queueUrl, serviceUrl, env = {}, batchSize = 100, functionTimeoutMs = 30_000 }) {
  Object.assign(process.env, { SERVICE_URL: serviceUrl, RETRY_BASE_MS: '100', RETRY_MAX_MS: '1000', SAFETY_MARGIN_MS: '1000', ...env });
  const { handler } = await import('../../src/handler.js');
  /** @type {any[]} */
  const logs = [];
  // The handler's one line per invocation is kept for assertions instead of flooding the output.
  const { logs: handlerLogs } = captureHandlerOutput();
  const runner = new LocalEventSource({
    sqs, queueUrl, handler, region: 'us-east-1', batchSize, batchWindowMs: 200, receivers: 4, concurrency: 2, functionTimeoutMs,
    waitTimeSeconds: 1, log: (line) => logs.push(line),
  });
  await runner.start();
  return { runner, logs, handlerLogs };
}
