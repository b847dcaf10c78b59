#!/usr/bin/env node
// `npm run feeder`: the local SQS event-source runner feeding the real handler.
// SQS_ENDPOINT, QUEUE_URL, SERVICE_URL, BATCH_SIZE, BATCH_WINDOW_MS, RECEIVERS, RUNNER_CONCURRENCY,
// FUNCTION_TIMEOUT_MS, and the handler's own variables (INGEST_TOKEN, POST_CHUNK_ITEMS, ...).
import { Logger } from '@aws-lambda-powertools/logger';
import { SQSClient } from '@aws-sdk/client-sqs';
import { loadFeederConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { handler } from '../../src/handler.js';
import { LocalEventSource } from '../local-runner.js';
import { loadRunnerConfig } from '../sqs-config.js';

let config;
try {
  config = loadRunnerConfig();
  loadFeederConfig(); // checked now, so a bad SERVICE_URL stops start-up rather than the first batch
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  console.error(`feeder: bad configuration: ${err.message}`);
  process.exit(1);
}

const sqs = new SQSClient({ endpoint: config.endpoint, region: config.region, credentials: config.credentials });
// The runner's lines go through the same Powertools Logger as the handler's.
const logger = new Logger({ serviceName: 'sluice-feeder-runner' });
const runner = new LocalEventSource({
  sqs,
  handler,
  ...config,
  log: (line) => {
    const { level, msg, ...fields } = /** @type {{ level: string, msg: string }} */ (line);
    if (level === 'warn') logger.warn(msg, fields);
    else logger.info(msg, fields);
  },
});
await runner.start();
logger.info('feeder polling', { queueUrl: config.queueUrl, batchSize: config.batchSize, batchWindowMs: config.batchWindowMs });

let stopping = false;
/** @param {NodeJS.Signals} signal */
async function stop(signal) {
  if (stopping) return;
  stopping = true;
  logger.info('feeder stopping: finishing the batches in hand', { signal });
  const totals = await runner.stop();
  logger.info('feeder stopped', { totals });
  sqs.destroy();
  process.exit(0);
}
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
