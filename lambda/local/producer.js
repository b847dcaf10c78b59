import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { backoffMs, sleep } from '../src/retry.js';
import { formatTraceparent } from '../src/traceparent.js';

// SQS's limit for one message, and for the sum of one SendMessageBatch's messages.
export const MAX_MESSAGE_BYTES = 262_144;
const MAX_BATCH_ENTRIES = 10;

/** @typedef {'merge-duplicates' | 'ignore-duplicates'} Resolution */

/** What a `traceparent` attribute takes of a message: its name, data type and 55-character value. */
const TRACEPARENT_BYTES = Buffer.byteLength('traceparentString') + 55;

/**
 * The message attributes that carry a resolution. SQS counts each attribute's name, data type and
 * value toward the message's size limit, so they come out of the room left for the body, as does
 * the `traceparent` attribute when traced (set per SendMessageBatch).
 * @param {Resolution | undefined} resolution @param {boolean} [traced]
 */
function attributesOf(resolution, traced = false) {
  const traceBytes = traced ? TRACEPARENT_BYTES : 0;
  if (!resolution) return { attributes: undefined, bytes: traceBytes };
  return { attributes: { resolution: { DataType: 'String', StringValue: resolution } }, bytes: Buffer.byteLength(`resolutionString${resolution}`) + traceBytes };
}

/**
 * Packs users into message bodies of up to `perMessage` users, closing a body early when one more
 * user would pass SQS's size limit (less what the resolution attribute, when given, takes of it).
 * @param {AsyncIterable<object> | Iterable<object>} users
 * @param {number} perMessage
 * @param {{ resolution?: Resolution, traced?: boolean }} [options]  the resolution the messages will be
 *   sent with; traced: whether they will carry a traceparent
 * @returns {AsyncGenerator<{ body: string, users: number }>}
 */
export async function* packMessages(users, perMessage, { resolution, traced } = {}) {
  const limit = MAX_MESSAGE_BYTES - attributesOf(resolution, traced).bytes;
  /** @type {string[]} */
  let parts = [];
  let bytes = 2;
  for await (const user of users) {
    const json = JSON.stringify(user);
    const size = Buffer.byteLength(json) + 1;
    if (size + 2 > limit) throw new Error(`one user is ${size} bytes, over SQS's ${MAX_MESSAGE_BYTES}-byte message limit`);
    if (parts.length > 0 && (parts.length >= perMessage || bytes + size > limit)) {
      yield { body: perMessage === 1 ? parts[0] : `[${parts.join(',')}]`, users: parts.length };
      parts = [];
      bytes = 2;
    }
    parts.push(json);
    bytes += size;
  }
  if (parts.length > 0) yield { body: perMessage === 1 ? parts[0] : `[${parts.join(',')}]`, users: parts.length };
}

/**
 * Sends messages with SendMessageBatch (10 entries, within the batch size limit), `concurrency`
 * calls in flight; failed entries are retried with backoff, and a message that still fails after
 * `maxAttempts` stops the run with an error.
 *
 * A resolution, when given, goes with every message as its `resolution` attribute, which the
 * feeder obeys over its own CONFLICT_RESOLUTION. With a tracer, each SendMessageBatch is a PRODUCER
 * span whose context every message carries as its `traceparent` attribute (the feeder's span
 * links to it); the messages must have been packed with `traced`.
 *
 * @param {{ sqs: import('@aws-sdk/client-sqs').SQSClient, queueUrl: string, messages: AsyncIterable<{ body: string, users: number }>,
 *   resolution?: Resolution, tracer?: import('@opentelemetry/api').Tracer,
 *   concurrency?: number, maxAttempts?: number, onSent?: (users: number, messages: number) => void }} options
 */
export async function sendMessages({ sqs, queueUrl, messages, resolution, tracer, concurrency = 8, maxAttempts = 8, onSent = () => {} }) {
  const { attributes, bytes: attributeBytes } = attributesOf(resolution, tracer !== undefined);
  const queue = queueUrl.split('/').at(-1) ?? queueUrl;
  const totals = { messages: 0, users: 0, retries: 0 };
  /** @type {Set<Promise<void>>} */
  const inFlight = new Set();

  /** @param {{ body: string, users: number }[]} batch */
  async function send(batch) {
    const span = tracer?.startSpan(`send ${queue}`, {
      kind: /** @type {import('@opentelemetry/api').SpanKind} */ (3), // PRODUCER
      attributes: { 'messaging.system': 'aws_sqs', 'messaging.operation.type': 'send', 'messaging.destination.name': queue, 'messaging.batch.message_count': batch.length },
    });
    const MessageAttributes = span
      ? { ...attributes, traceparent: { DataType: 'String', StringValue: formatTraceparent(span.spanContext()) } }
      : attributes;
    try {
      await sendBatch(batch, MessageAttributes);
    } finally {
      span?.end();
    }
  }

  /**
   * @param {{ body: string, users: number }[]} batch
   * @param {Record<string, import('@aws-sdk/client-sqs').MessageAttributeValue> | undefined} MessageAttributes
   */
  async function sendBatch(batch, MessageAttributes) {
    let entries = batch.map((m, i) => ({ Id: String(i), MessageBody: m.body, users: m.users }));
    /** @type {string | undefined} what SQS (or the network) said last: the failure's cause, for its one line */
    let lastReason;
    for (let attempt = 0; entries.length > 0; attempt++) {
      if (attempt >= maxAttempts) throw new Error(`${entries.length} messages still failed after ${maxAttempts} attempts${lastReason ? ` (the last: ${lastReason})` : ''}`);
      if (attempt > 0) {
        totals.retries++;
        await sleep(backoffMs(attempt - 1, { baseMs: 100, maxMs: 5000 }));
      }
      const out = await sqs
        .send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries.map(({ Id, MessageBody }) => ({ Id, MessageBody, MessageAttributes })) }))
        .catch((err) => ({ Successful: [], Failed: entries.map((e) => ({ Id: e.Id, Message: err.message })) }));
      const failed = new Set((out.Failed ?? []).map((f) => f.Id));
      lastReason = out.Failed?.[0]?.Message ?? lastReason;
      const sent = entries.filter((e) => !failed.has(e.Id));
      const users = sent.reduce((n, e) => n + e.users, 0);
      totals.messages += sent.length;
      totals.users += users;
      onSent(users, sent.length);
      entries = entries.filter((e) => failed.has(e.Id));
    }
  }

  /** @type {{ body: string, users: number }[]} */
  let batch = [];
  let batchBytes = 0;
  const dispatch = async () => {
    const run = send(batch).finally(() => inFlight.delete(run));
    inFlight.add(run);
    batch = [];
    batchBytes = 0;
    if (inFlight.size >= concurrency) await Promise.race(inFlight);
  };
  for await (const message of messages) {
    const size = Buffer.byteLength(message.body) + attributeBytes;
    if (batch.length > 0 && (batch.length >= MAX_BATCH_ENTRIES || batchBytes + size > MAX_MESSAGE_BYTES)) await dispatch();
    batch.push(message);
    batchBytes += size;
  }
  if (batch.length > 0) await dispatch();
  await Promise.all(inFlight);
  return totals;
}
