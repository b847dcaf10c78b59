import { setEnv } from '../../../test/support/env.js';
import { LocalEventSource } from '../../local/local-runner.js';
import { feederFromEnvironment } from '../../src/handler.js';
import { captureHandlerOutput } from './handler-output.js';

/**
 * The local runner with the real handler, pointed at a queue. The handler reads its configuration
 * from process.env on its first invocation, so SERVICE_URL and friends are set there until stop(),
 * which puts them back (and stdout, whose handler lines are kept for assertions). stop() may be
 * called twice: in the test, for the totals, and in its after hook, in case the test failed first.
 * @param {{ sqs: import('@aws-sdk/client-sqs').SQSClient, queueUrl: string, serviceUrl: string, env?: Record<string, string>,
 *   batchSize?: number, functionTimeoutMs?: number }} options
 */
export async function startFeeder({
  sqs,
  queueUrl,
  serviceUrl,
  env = {},
  batchSize = 100,
  functionTimeoutMs = 30_000,
}) {
  const restoreEnv = setEnv({
    SERVICE_URL: serviceUrl,
    RETRY_BASE_MS: '100',
    RETRY_MAX_MS: '1000',
    SAFETY_MARGIN_MS: '1000',
    ...env,
  });
  // A feeder of its own, so it reads the settings above, not an earlier feeder's.
  const handler = feederFromEnvironment(process.env);
  /** @type {any[]} */
  const logs = [];
  const output = captureHandlerOutput();
  const runner = new LocalEventSource({
    sqs,
    queueUrl,
    handler,
    region: 'us-east-1',
    batchSize,
    batchWindowMs: 200,
    receivers: 4,
    concurrency: 2,
    functionTimeoutMs,
    waitTimeSeconds: 1,
    log: (line) => logs.push(line),
  });
  await runner.start();
  /** @type {ReturnType<LocalEventSource['stop']> | undefined} */
  let stopped;
  return {
    logs,
    handlerLogs: output.logs,
    /** Stops polling, lets the handler finish what was received, then restores process.env and stdout. */
    stop() {
      stopped ??= runner.stop().finally(() => {
        output.restore();
        restoreEnv();
      });
      return stopped;
    },
  };
}
