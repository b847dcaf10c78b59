#!/usr/bin/env node
// `npm run feeder`: the local SQS event-source runner feeding the real handler.
import { Command } from 'commander';
import { ConfigError, TRACING_VARIABLES, loadTracingConfig, redactUrl } from '@sluice/env';
import { FEEDER_VARIABLES, loadFeederConfig } from '../../src/config.js';
import { environmentSection } from '../environment-help.js';
import { RUNNER_VARIABLES, SQS_VARIABLES, loadRunnerConfig } from '../sqs-config.js';

// The declarations and loaders are cheap (no SDK): the usage is made from them before anything starts.
// The command line every sluice command has (db/src/command-line.js, which this image does not
// hold): -h prints the usage and exits 0; anything else is one line, the usage, exit 2.
new Command('npm run feeder --')
  .description(
    "The local event-source runner: plays Lambda's SQS event-source mapping against any SQS endpoint (long polling, batches up to BATCH_SIZE within BATCH_WINDOW_MS, Lambda's event shape) and hands each batch to the real handler, which posts the users to SERVICE_URL; it deletes only the messages the handler did not report as failed. On a FIFO queue (its FifoQueue attribute) each receive is one batch, as Lambda does: at most 10 messages (BATCH_SIZE if smaller), no batching window. SIGINT or SIGTERM stops it cleanly: it stops polling, hands what it holds to the handler and waits for the deletes; a second signal leaves at once (exit code 1), and what it held returns to the queue. A bad variable stops it at start with exit code 1.",
  )
  .helpOption('-h, --help', 'print this usage and exit')
  .showHelpAfterError()
  .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2))
  .addHelpText(
    'after',
    environmentSection([
      [
        "Environment, the runner's (lambda/local/sqs-config.js), with Lambda's meaning:",
        { ...SQS_VARIABLES, ...RUNNER_VARIABLES },
      ],
      ["The handler's (lambda/src/config.js):", FEEDER_VARIABLES],
      ['Tracing, off by default (@sluice/env/tracing, docs/tracing.md):', TRACING_VARIABLES],
    ]),
  )
  .parse();

const { Logger } = await import('@aws-lambda-powertools/logger');
const { SQSClient } = await import('@aws-sdk/client-sqs');
const { handler } = await import('../../src/handler.js');
const { LocalEventSource, RECEIVE_WAIT_SECONDS } = await import('../local-runner.js');
const { startLocalTracing } = await import('../tracing.js');

let config;
try {
  config = loadRunnerConfig();
  loadFeederConfig(); // checked now, so a bad SERVICE_URL stops start-up rather than the first batch
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  console.error(`feeder: bad configuration: ${err.message}`);
  process.exit(1);
}

// What the ADOT layer is on AWS: the SDK that records the handler's spans (off unless asked).
let stopTracing;
try {
  stopTracing = await startLocalTracing('sluice-feeder', loadTracingConfig());
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  console.error(`feeder: bad configuration: ${err.message}`);
  process.exit(1);
}

const sqs = new SQSClient({
  endpoint: config.endpoint,
  region: config.region,
  credentials: config.credentials,
});
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
await runner.start().catch((/** @type {Error & { Code?: string, code?: string }} */ err) => {
  // The queue is asked for its attributes first: an SQS that cannot be reached, or a queue it does
  // not have, is one line here rather than a stack trace.
  const cause = err.Code?.replace(/^.*#/, '') ?? err.code ?? err.name;
  const said = (err.message || cause).replace(/\.$/, '');
  const hint = config.endpoint
    ? '; is ElasticMQ running (`npm run elasticmq`), and is QUEUE_URL one of its queues?'
    : '';
  console.error(
    `feeder: cannot use the queue ${redactUrl(config.queueUrl)}: ${said}${said.includes(cause) ? '' : ` (${cause})`}${hint}`,
  );
  sqs.destroy();
  process.exit(1);
});
logger.info('feeder polling', {
  queueUrl: redactUrl(config.queueUrl),
  batchSize: config.batchSize,
  batchWindowMs: config.batchWindowMs,
});

let stopping = false;
/** @param {NodeJS.Signals} signal */
async function stop(signal) {
  if (stopping) {
    // A second signal: the batches in hand may be waiting out an outage until the function
    // timeout. Leave now; what was not deleted returns to the queue once its visibility times out.
    logger.warn('feeder stopped at once: the batches in hand return to the queue', { signal });
    process.exit(1);
  }
  stopping = true;
  logger.info(
    'feeder stopping: waiting for the long polls open at the queue, then finishing the batches in hand (signal again to leave at once)',
    { signal, pollSeconds: RECEIVE_WAIT_SECONDS },
  );
  const totals = await runner.stop();
  logger.info('feeder stopped', { totals });
  sqs.destroy();
  await stopTracing?.();
  process.exit(0);
}
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
