#!/usr/bin/env node
// `npm run produce`: users (or erasures) into the queue, many per message.
import { createReadStream } from 'node:fs';
import readline from 'node:readline';
import { Command, InvalidArgumentError, Option } from 'commander';
import { TRACING_VARIABLES, integer, loadTracingConfig } from '@sluice/env';
import { environmentSection } from '../environment-help.js';
import { SQS_VARIABLES, loadSqsConfig } from '../sqs-config.js';

const positive = (/** @type {string} */ value) => {
  try {
    return integer({ min: 1 }).parse(value);
  } catch {
    throw new InvalidArgumentError('Expected a whole number of at least 1.');
  }
};
// The command line every sluice command has (db/src/command-line.js, which this image does not
// hold): -h prints the usage and exits 0; anything else is one line, the usage, exit 2.
const program = new Command('npm run produce --')
  .description(
    'Generates users (or reads them from an NDJSON file, one user a line) and sends them to ' +
      'QUEUE_URL, many per message, with SendMessageBatch; a progress bar on stderr, then a final ' +
      'count as one JSON line. Give --count, --file or both (the first N users of the file). ' +
      'With --erase or --erase-file it sends erasures instead: messages with the attribute ' +
      'operation=erase, whose users the feeder erases (POST /erasures). To a FIFO queue ' +
      '(QUEUE_URL ends in .fifo) each message also gets a message group and a deduplication id ' +
      "of its own; a user's erasure takes the group of its changes, so it comes after them.",
  )
  .helpOption('-h, --help', 'print this usage and exit')
  .showHelpAfterError()
  .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : 2))
  .option('--count <n>', 'users to generate (with --file: to send at most)', positive)
  .option('--file <users.ndjson>', 'send the users of this file instead')
  .option('--per-message <k>', 'users per SQS message', positive, 100)
  .option('--concurrency <c>', 'SendMessageBatch calls in flight at once', positive, 8)
  .option(
    '--message-groups <g>',
    "to a FIFO queue (QUEUE_URL ends in .fifo): message groups, by a hash of each user's email, so one user's changes keep their order while groups spread the load; a message holds users of one group",
    positive,
    32,
  )
  .option(
    '--stamp-changed-at',
    "give each user without a changedAt the time it is produced (RFC 3339, microseconds, strictly increasing): merge mode then keeps each user's newest change whatever order the queue delivers in",
  )
  .addOption(
    new Option(
      '--resolution <r>',
      "the messages' resolution attribute: what the service does with an email already stored (default: none, the feeder's CONFLICT_RESOLUTION)",
    ).choices(['merge-duplicates', 'ignore-duplicates']),
  )
  .addOption(
    new Option(
      '--erase <email...>',
      'erase these users instead of sending users: messages with the operation attribute ' +
        'erase, each body an array of emails',
    ).conflicts(['count', 'file', 'resolution']),
  )
  .addOption(
    new Option(
      '--erase-file <file>',
      'erase the users this file names, one a line: an email, or a JSON object ' +
        '{"email", "changedAt"} (when the erasure happened at the source); after the emails ' +
        'of --erase',
    ).conflicts(['count', 'file', 'resolution']),
  )
  .addHelpText(
    'after',
    environmentSection([
      ['Environment (lambda/local/sqs-config.js):', SQS_VARIABLES],
      ['Tracing, off by default (@sluice/env/tracing, docs/tracing.md):', TRACING_VARIABLES],
    ]),
  )
  .parse();
const args = program.opts();
const count = /** @type {number | undefined} */ (args.count);
const perMessage = /** @type {number} */ (args.perMessage);
const concurrency = /** @type {number} */ (args.concurrency);
const erasing = Boolean(args.erase || args.eraseFile);
const noun = erasing ? 'erasures' : 'users';
if (!count && !args.file && !erasing)
  program.error(
    'error: say how many users to generate (--count), which file to send (--file), ' +
      'or whom to erase (--erase, --erase-file)',
  );

// A file that cannot be read is one line naming it and why, before the queue is touched.
/** @type {string | undefined} */
const file = args.file ?? args.eraseFile;
if (file) {
  const { access } = await import('node:fs/promises');
  const { statSync } = await import('node:fs');
  const problem = await access(file).then(
    () => (statSync(file).isFile() ? undefined : 'not a regular file'),
    (/** @type {NodeJS.ErrnoException} */ err) =>
      ({ ENOENT: 'no such file', EACCES: 'permission denied' })[err.code ?? ''] ?? err.message,
  );
  if (problem) {
    console.error(`produce: cannot read ${file}: ${problem}`);
    process.exit(1);
  }
}

const { SQSClient } = await import('@aws-sdk/client-sqs');
const { Presets, SingleBar } = await import('cli-progress');
const { changeStamper, packMessages, sendMessages } = await import('../producer.js');
const { startLocalTracing } = await import('../tracing.js');

let config;
/** @type {(() => Promise<void>) | undefined} */
let stopTracing;
try {
  config = loadSqsConfig();
  stopTracing = await startLocalTracing('sluice-producer', loadTracingConfig());
} catch (err) {
  console.error(`produce: bad configuration: ${/** @type {Error} */ (err).message}`);
  process.exit(1);
}

const runId = Date.now().toString(36);
/**
 * The users (or erasures) to send, each stamped with its changedAt when asked: an email alone
 * becomes `{email, changedAt}`. @returns {AsyncGenerator<unknown>}
 */
async function* items() {
  const source = erasing ? erasures() : unstamped();
  if (!args.stampChangedAt) {
    yield* source;
    return;
  }
  const stamp = changeStamper();
  for await (const item of source) yield stamp(typeof item === 'string' ? { email: item } : item);
}
/** Each email of --erase, then each line of --erase-file. @returns {AsyncGenerator<unknown>} */
async function* erasures() {
  yield* args.erase ?? [];
  if (!args.eraseFile) return;
  let line = 0;
  for await (const text of readline.createInterface({ input: createReadStream(args.eraseFile) })) {
    line++;
    const entry = text.trim();
    if (!entry) continue;
    if (!entry.startsWith('{')) {
      yield entry;
      continue;
    }
    try {
      yield JSON.parse(entry);
    } catch {
      throw new Error(`${args.eraseFile}:${line} is not JSON`);
    }
  }
}
/** @returns {AsyncGenerator<object>} */
async function* unstamped() {
  if (args.file) {
    let line = 0;
    for await (const text of readline.createInterface({ input: createReadStream(args.file) })) {
      line++;
      if (!text.trim()) continue;
      try {
        yield JSON.parse(text);
      } catch {
        throw new Error(`${args.file}:${line} is not JSON`);
      }
      if (count && line >= count) return;
    }
    return;
  }
  for (let i = 0; i < /** @type {number} */ (count); i++)
    yield { email: `produced-${runId}-${i}@example.com`, name: `Produced User ${i}` };
}

// cli-progress redraws the bar in place on a terminal, and prints a line every 2 s otherwise (logs, CI).
const started = Date.now();
let sentUsers = 0;
const rate = () => Math.round(sentUsers / Math.max(0.001, (Date.now() - started) / 1000));
// Known ahead: the users asked for, or the emails given with no file.
const total = count ?? (args.eraseFile ? undefined : args.erase?.length);
const bar = new SingleBar(
  {
    stream: process.stderr,
    format: total
      ? `[{bar}] {percentage}% {value}/{total} ${noun}, {rate}/s`
      : `{value} ${noun}, {rate}/s`,
    barsize: 30,
    noTTYOutput: true,
    // Leave the terminal's line wrapping alone, so a Ctrl-C mid-run cannot leave it switched off.
    linewrap: true,
  },
  Presets.legacy,
);
bar.start(total ?? 0, 0, { rate: 0 });

const sqs = new SQSClient({
  endpoint: config.endpoint,
  region: config.region,
  credentials: config.credentials,
});
try {
  const totals = await sendMessages({
    sqs,
    queueUrl: config.queueUrl,
    // A FIFO queue's messages each hold users of one message group (lambda/local/producer.js).
    messages: packMessages(items(), perMessage, {
      resolution: args.resolution,
      operation: erasing ? 'erase' : undefined,
      traced: stopTracing !== undefined,
      groups: config.queueUrl.endsWith('.fifo') ? args.messageGroups : undefined,
    }),
    resolution: args.resolution,
    operation: erasing ? 'erase' : undefined,
    tracer: stopTracing
      ? (await import('@opentelemetry/api')).trace.getTracer('sluice-producer')
      : undefined,
    concurrency,
    onSent: (n) => {
      sentUsers += n;
      bar.update(sentUsers, { rate: rate() });
    },
  });
  bar.update(sentUsers, { rate: rate() });
  bar.stop();
  const seconds = (Date.now() - started) / 1000;
  console.log(
    JSON.stringify({
      msg: 'produced',
      ...(erasing ? { operation: 'erase', erasures: totals.users } : { users: totals.users }),
      messages: totals.messages,
      retries: totals.retries,
      seconds: Number(seconds.toFixed(2)),
    }),
  );
} catch (err) {
  bar.stop();
  console.error(`produce failed after ${sentUsers} ${noun}: ${/** @type {Error} */ (err).message}`);
  process.exitCode = 1;
} finally {
  sqs.destroy();
  // The spans still held by the batch processor leave before the process does.
  await stopTracing?.();
}
