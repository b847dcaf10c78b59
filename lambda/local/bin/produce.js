#!/usr/bin/env node
// `npm run produce -- --count N [--per-message K] [--file users.ndjson] [--concurrency C]`
// Generates N users (or reads them from NDJSON) and sends them to QUEUE_URL, K users per message.
import { createReadStream } from 'node:fs';
import readline from 'node:readline';
import { parseArgs } from 'node:util';
import { SQSClient } from '@aws-sdk/client-sqs';
import { Presets, SingleBar } from 'cli-progress';
import { loadSqsConfig } from '../sqs-config.js';
import { packMessages, sendMessages } from '../producer.js';

const USAGE = 'usage: npm run produce -- --count N [--per-message K] [--file users.ndjson] [--concurrency C]';
let args;
try {
  ({ values: args } = parseArgs({
    options: {
      count: { type: 'string' },
      'per-message': { type: 'string', default: '100' },
      file: { type: 'string' },
      concurrency: { type: 'string', default: '8' },
      help: { type: 'boolean', short: 'h' },
    },
  }));
} catch (err) {
  console.error(`${/** @type {Error} */ (err).message}\n${USAGE}`);
  process.exit(2);
}
if (args.help) {
  console.log(USAGE);
  process.exit(0);
}
const positive = (/** @type {string | undefined} */ v, /** @type {string} */ name) => {
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v) || Number(v) < 1) {
    console.error(`--${name} must be a whole number of at least 1\n${USAGE}`);
    process.exit(2);
  }
  return Number(v);
};
const count = positive(args.count, 'count');
const perMessage = /** @type {number} */ (positive(args['per-message'], 'per-message'));
const concurrency = /** @type {number} */ (positive(args.concurrency, 'concurrency'));
if (!count && !args.file) {
  console.error(`say how many users to generate (--count) or which file to send (--file)\n${USAGE}`);
  process.exit(2);
}

let config;
try {
  config = loadSqsConfig();
} catch (err) {
  console.error(`produce: bad configuration: ${/** @type {Error} */ (err).message}`);
  process.exit(1);
}

const runId = Date.now().toString(36);
/** @returns {AsyncGenerator<object>} */
async function* users() {
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
  for (let i = 0; i < /** @type {number} */ (count); i++) yield { email: `produced-${runId}-${i}@example.com`, name: `Produced User ${i}` };
}

// cli-progress redraws the bar in place on a terminal, and prints a line every 2 s otherwise (logs, CI).
const started = Date.now();
let sentUsers = 0;
const rate = () => Math.round(sentUsers / Math.max(0.001, (Date.now() - started) / 1000));
const bar = new SingleBar({
  stream: process.stderr,
  format: count ? '[{bar}] {percentage}% {value}/{total} users, {rate}/s' : '{value} users, {rate}/s',
  barsize: 30,
  noTTYOutput: true,
  // Leave the terminal's line wrapping alone, so a Ctrl-C mid-run cannot leave it switched off.
  linewrap: true,
}, Presets.legacy);
bar.start(count ?? 0, 0, { rate: 0 });

const sqs = new SQSClient({ endpoint: config.endpoint, region: config.region, credentials: config.credentials });
try {
  const totals = await sendMessages({
    sqs,
    queueUrl: config.queueUrl,
    messages: packMessages(users(), perMessage),
    concurrency,
    onSent: (n) => {
      sentUsers += n;
      bar.update(sentUsers, { rate: rate() });
    },
  });
  bar.update(sentUsers, { rate: rate() });
  bar.stop();
  const seconds = (Date.now() - started) / 1000;
  console.log(JSON.stringify({ msg: 'produced', users: totals.users, messages: totals.messages, retries: totals.retries, seconds: Number(seconds.toFixed(2)) }));
} catch (err) {
  bar.stop();
  console.error(`produce failed after ${sentUsers} users: ${/** @type {Error} */ (err).message}`);
  process.exitCode = 1;
} finally {
  sqs.destroy();
}
