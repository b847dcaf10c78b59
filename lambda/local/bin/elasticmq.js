#!/usr/bin/env node
// `npm run elasticmq`: the SQS emulator for the local walkthrough (docs/feeder.md), with the queue
// and the dead-letter queue the producer and the feeder use.
import net from 'node:net';
import { Command } from 'commander';
import { ConfigError, loadEnv } from '@sluice/env';
import { environmentSection } from '../environment-help.js';
import { ELASTICMQ_VARIABLES } from '../sqs-config.js';

// The command line every sluice command has (db/src/command-line.js, which this image does not
// hold): -h prints the usage and exits 0; anything else is one line, the usage, exit 2.
new Command('npm run elasticmq --')
  .description(
    'Starts ElasticMQ, the SQS emulator, on 127.0.0.1 (fetched once from Maven Central into ~/.cache/sluice; Java 17 runs it, Maven fetches it) with the queue sluice-users and its dead-letter queue sluice-users-dlq (a message moves there after 5 receives), and the FIFO pair sluice-users.fifo and sluice-users-dlq.fifo, as the SAM template deploys them. It prints the endpoint and the queue URLs for SQS_ENDPOINT and QUEUE_URL, and runs until Ctrl-C (SIGINT) or SIGTERM. The queues live in memory: their messages go when it stops. A busy port or a missing Java is one line and exit code 1.',
  )
  .helpOption('-h, --help', 'print this usage and exit')
  .showHelpAfterError()
  .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2))
  .addHelpText('after', environmentSection([['Environment:', ELASTICMQ_VARIABLES]]))
  .parse();

/** @param {string} message @returns {never} */
function fail(message) {
  console.error(`elasticmq: ${message}`);
  process.exit(1);
}

let port = 9324;
try {
  port = loadEnv(ELASTICMQ_VARIABLES, process.env).ELASTICMQ_PORT;
} catch (err) {
  if (!(err instanceof ConfigError)) throw err;
  fail(`bad configuration: ${err.message}`);
}

// Java would say a busy port in a stack of twenty lines: asked first, it is one.
const busy = await new Promise((resolve) => {
  const probe = net.createServer();
  probe.once('error', (err) => resolve(/** @type {NodeJS.ErrnoException} */ (err).code));
  probe.listen({ host: '127.0.0.1', port, exclusive: true }, () =>
    probe.close(() => resolve(undefined)),
  );
});
if (busy === 'EADDRINUSE')
  fail(
    `port ${port} on 127.0.0.1 is in use (another \`npm run elasticmq\`?): stop it, or set ELASTICMQ_PORT to a free port`,
  );
if (busy) fail(`cannot listen on 127.0.0.1:${port} (${busy}): set ELASTICMQ_PORT to another port`);

const { DEFAULT_QUEUES, startElasticMQ } = await import('../elasticmq/elasticmq.js');
// Each queue with its dead-letter queue: the standard pair first, then the FIFO one.
const pairs = DEFAULT_QUEUES.filter((q) => q.deadLetter);

let stopping = false;
// A Ctrl-C reaches Java too (the terminal signals the whole foreground group), so either may go first.
const server = await startElasticMQ({ port, log: (m) => console.error(m) }).catch((err) =>
  fail(err.message),
);
const queueUrl = server.queueUrl(pairs[0].name);
console.log(
  [
    `ElasticMQ (SQS emulator) on ${server.endpoint}`,
    ...pairs.flatMap(({ name, fifo, visibilityTimeoutSeconds, deadLetter }) => {
      const kind = fifo ? 'FIFO ' : '';
      return [
        `  ${`${kind}queue`.padEnd(24)}${server.queueUrl(name)}  (visibility timeout ${visibilityTimeoutSeconds} s)`,
        `  ${`${kind}dead-letter queue`.padEnd(24)}${server.queueUrl(deadLetter?.name ?? '')}  (after ${deadLetter?.maxReceiveCount} receives)`,
      ];
    }),
    'For npm run produce and npm run feeder, in another terminal:',
    `  export SQS_ENDPOINT=${server.endpoint} QUEUE_URL=${queueUrl}`,
    `  (QUEUE_URL=${server.queueUrl(pairs.find((q) => q.fifo)?.name ?? '')} for the FIFO queue: docs/feeder.md)`,
    'Ctrl-C stops it; the queues live in memory, so their messages go with it.',
  ].join('\n'),
);

/** @param {NodeJS.Signals} signal */
async function stop(signal) {
  if (stopping) return;
  stopping = true;
  console.error(`elasticmq: stopping (${signal})`);
  await server.stop();
  console.error('elasticmq: stopped');
  process.exit(0);
}
process.on('SIGINT', stop);
process.on('SIGTERM', stop);

const { code, signal } = await server.exited;
if (!stopping) {
  // Java stopped by a signal of its own (a Ctrl-C that reached it first: 130, or SIGTERM: 143) is a stop too.
  if (signal || code === 130 || code === 143) await stop(signal ?? 'SIGINT');
  else fail(`ElasticMQ exited (exit code ${code}): ${server.lastWords()}`);
}
