import { createHash, randomUUID } from 'node:crypto';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { backoffMs, sleep } from '../src/retry.js';
import { formatTraceparent } from '../src/traceparent.js';

// SQS's limit for one message, and for the sum of one SendMessageBatch's messages.
export const MAX_MESSAGE_BYTES = 262_144;
const MAX_BATCH_ENTRIES = 10;

/** @typedef {'merge-duplicates' | 'ignore-duplicates'} Resolution */
/**
 * The `operation` attribute's value: none (or upsert) stores users, `erase` erases them.
 * @typedef {'upsert' | 'erase'} Operation
 */
/** @typedef {{ resolution?: Resolution, operation?: Operation }} Attributes */

/** What a `traceparent` attribute takes of a message: its name, data type and 55-character value. */
const TRACEPARENT_BYTES = Buffer.byteLength('traceparentString') + 55;

/**
 * The message attributes that carry a resolution and an operation, and the bytes they and a
 * `traceparent` take of the body's room (SQS counts them in its limit).
 * @param {Attributes} asked @param {boolean} [traced]
 */
function attributesOf(asked, traced = false) {
  /** @type {Record<string, import('@aws-sdk/client-sqs').MessageAttributeValue>} */
  const attributes = {};
  let bytes = traced ? TRACEPARENT_BYTES : 0;
  for (const [name, value] of Object.entries(asked)) {
    if (value === undefined) continue;
    attributes[name] = { DataType: 'String', StringValue: value };
    bytes += Buffer.byteLength(`${name}String${value}`);
  }
  return { attributes: Object.keys(attributes).length > 0 ? attributes : undefined, bytes };
}

/** @typedef {{ body: string, users: number, group?: string }} PackedMessage */

/** On a FIFO queue, the message group of messages packed without groups: one, so one order for all. */
export const SINGLE_GROUP = 'users';

/**
 * `--stamp-changed-at`: a user without `changedAt` gets the time it was produced (RFC 3339, UTC,
 * microseconds), strictly increasing, so a later line is a newer change; a non-object goes through.
 * @param {() => number} [nowMs]  milliseconds with a fraction @returns {(user: unknown) => unknown}
 */
export function changeStamper(nowMs = () => performance.timeOrigin + performance.now()) {
  let last = 0;
  return (user) => {
    if (
      user === null ||
      typeof user !== 'object' ||
      Array.isArray(user) ||
      Object.hasOwn(user, 'changedAt')
    )
      return user;
    last = Math.max(last + 1, Math.floor(nowMs() * 1000));
    const ms = Math.floor(last / 1000);
    const micros = String(last % 1000).padStart(3, '0');
    return { ...user, changedAt: new Date(ms).toISOString().replace('Z', `${micros}Z`) };
  };
}

/**
 * A user's message group on a FIFO queue: a bucket of a hash of its lower-cased email, so a user's
 * changes, and its erasure (an email alone too), keep one group and their order.
 * @param {unknown} user @param {number} groups
 */
export function messageGroupOf(user, groups) {
  const email = typeof user === 'string' ? user : /** @type {{ email?: unknown }} */ (user)?.email;
  const key = typeof email === 'string' ? email.toLowerCase() : JSON.stringify(email ?? null);
  return `users-${createHash('sha256').update(key).digest().readUInt32BE(0) % groups}`;
}

/**
 * Packs users (or erasures: emails, `{email, changedAt}` objects) into bodies of up to
 * `perMessage`, closed early at SQS's size limit (less the attributes'). With `groups` (FIFO), a
 * message holds one group's users, in their order.
 * @param {AsyncIterable<unknown> | Iterable<unknown>} users @param {number} perMessage
 * @param {Attributes & { traced?: boolean, groups?: number }} [options]
 * @returns {AsyncGenerator<PackedMessage>}
 */
export async function* packMessages(
  users,
  perMessage,
  { resolution, operation, traced, groups } = {},
) {
  const limit = MAX_MESSAGE_BYTES - attributesOf({ resolution, operation }, traced).bytes;
  /** @type {Map<string | undefined, { parts: string[], bytes: number }>} the message being filled, per group */
  const open = new Map();
  /** @param {{ parts: string[] }} m @param {string | undefined} group @returns {PackedMessage} */
  const close = ({ parts }, group) => {
    const message = {
      body: perMessage === 1 ? parts[0] : `[${parts.join(',')}]`,
      users: parts.length,
    };
    return group === undefined ? message : { ...message, group };
  };
  for await (const user of users) {
    const json = JSON.stringify(user);
    const size = Buffer.byteLength(json) + 1;
    if (size + 2 > limit)
      throw new Error(
        `one user is ${size} bytes, over SQS's ${MAX_MESSAGE_BYTES}-byte message limit`,
      );
    const group = groups ? messageGroupOf(user, groups) : undefined;
    let message = open.get(group);
    if (message && (message.parts.length >= perMessage || message.bytes + size > limit)) {
      yield close(message, group);
      message = undefined;
    }
    if (!message) open.set(group, (message = { parts: [], bytes: 2 }));
    message.parts.push(json);
    message.bytes += size;
  }
  for (const [group, message] of open) yield close(message, group);
}

/**
 * Sends messages by SendMessageBatch, `concurrency` calls in flight, failed entries retried with
 * backoff up to `maxAttempts`; a resolution goes with each as its `resolution` attribute, an
 * operation (`erase`: its body names users to erase) as its `operation` attribute. To a FIFO
 * queue each goes with its group and a deduplication id of this run's and its number (the same on a
 * retry, so a lost answer enqueues nothing twice, unlike a body hash would for a user changed back);
 * a group's messages are enqueued in order, one at a time. With a tracer, each call is a PRODUCER
 * span every message carries as `traceparent` (pack them with `traced`).
 * @param {{ sqs: import('@aws-sdk/client-sqs').SQSClient, queueUrl: string, messages: AsyncIterable<PackedMessage>,
 *   resolution?: Resolution, operation?: Operation, tracer?: import('@opentelemetry/api').Tracer,
 *   concurrency?: number, maxAttempts?: number, onSent?: (users: number, messages: number) => void }} options
 */
export async function sendMessages({
  sqs,
  queueUrl,
  messages,
  resolution,
  operation,
  tracer,
  concurrency = 8,
  maxAttempts = 8,
  onSent = () => {},
}) {
  const { attributes, bytes: attributeBytes } = attributesOf(
    { resolution, operation },
    tracer !== undefined,
  );
  const queue = queueUrl.split('/').at(-1) ?? queueUrl;
  const totals = { messages: 0, users: 0, retries: 0 };
  /** @type {Set<Promise<void>>} */
  const inFlight = new Set();
  const fifo = queueUrl.endsWith('.fifo');
  const runId = randomUUID();
  let sequence = 0;
  /** FIFO: the send in flight for each group. @type {Map<string, Promise<void>>} */
  const busy = new Map();

  /** @typedef {{ body: string, users: number, group?: string, deduplicationId?: string }} Outgoing */
  /** @param {Outgoing[]} batch */
  async function send(batch) {
    const span = tracer?.startSpan(`send ${queue}`, {
      kind: /** @type {import('@opentelemetry/api').SpanKind} */ (3), // PRODUCER
      attributes: {
        'messaging.system': 'aws_sqs',
        'messaging.operation.type': 'send',
        'messaging.destination.name': queue,
        'messaging.batch.message_count': batch.length,
      },
    });
    const MessageAttributes = span
      ? {
          ...attributes,
          traceparent: { DataType: 'String', StringValue: formatTraceparent(span.spanContext()) },
        }
      : attributes;
    try {
      await sendBatch(batch, MessageAttributes);
    } finally {
      span?.end();
    }
  }

  /**
   * @param {Outgoing[]} batch
   * @param {Record<string, import('@aws-sdk/client-sqs').MessageAttributeValue> | undefined} MessageAttributes
   */
  async function sendBatch(batch, MessageAttributes) {
    let entries = batch.map((m, i) => ({
      Id: String(i),
      MessageBody: m.body,
      users: m.users,
      MessageGroupId: m.group,
      MessageDeduplicationId: m.deduplicationId,
    }));
    /** @type {string | undefined} what SQS (or the network) said last: the failure's cause, for its one line */
    let lastReason;
    for (let attempt = 0; entries.length > 0; attempt++) {
      if (attempt >= maxAttempts)
        throw new Error(
          `${entries.length} messages still failed after ${maxAttempts} attempts${lastReason ? ` (the last: ${lastReason})` : ''}`,
        );
      if (attempt > 0) {
        totals.retries++;
        await sleep(backoffMs(attempt - 1, { baseMs: 100, maxMs: 5000 }));
      }
      const out = await sqs
        .send(
          new SendMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: entries.map(({ Id, MessageBody, MessageGroupId, MessageDeduplicationId }) => ({
              Id,
              MessageBody,
              MessageAttributes,
              MessageGroupId,
              MessageDeduplicationId,
            })),
          }),
        )
        .catch((err) => ({
          Successful: [],
          Failed: entries.map((e) => ({ Id: e.Id, Message: err.message })),
        }));
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

  /** @type {Outgoing[]} */
  let batch = [];
  let batchBytes = 0;
  const dispatch = async () => {
    const groups = batch.flatMap((m) => (m.group === undefined ? [] : [m.group]));
    const run = send(batch).finally(() => {
      inFlight.delete(run);
      for (const group of groups) if (busy.get(group) === run) busy.delete(group);
    });
    inFlight.add(run);
    for (const group of groups) busy.set(group, run);
    batch = [];
    batchBytes = 0;
    if (inFlight.size >= concurrency) await Promise.race(inFlight);
  };
  for await (const packed of messages) {
    /** @type {Outgoing} */
    // (A standard queue takes no group: there MessageGroupId would ask for fair queueing.)
    const message = fifo
      ? {
          ...packed,
          group: packed.group ?? SINGLE_GROUP,
          deduplicationId: `${runId}-${sequence++}`,
        }
      : { body: packed.body, users: packed.users };
    const size = Buffer.byteLength(message.body) + attributeBytes;
    const sameGroup = fifo && batch.some((m) => m.group === message.group);
    if (
      batch.length > 0 &&
      (sameGroup || batch.length >= MAX_BATCH_ENTRIES || batchBytes + size > MAX_MESSAGE_BYTES)
    )
      await dispatch();
    // FIFO: the group's previous message is enqueued (retries included) before this one goes.
    for (let previous; (previous = busy.get(/** @type {string} */ (message.group)));)
      await previous;
    batch.push(message);
    batchBytes += size;
  }
  if (batch.length > 0) await dispatch();
  await Promise.all(inFlight);
  return totals;
}
