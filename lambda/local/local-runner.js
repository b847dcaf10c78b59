import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
} from '@aws-sdk/client-sqs';
import { lambdaContext, toLambdaRecord } from './sqs-event.js';

/** @typedef {import('@aws-sdk/client-sqs').Message} Message */
/**
 * @typedef {object} RunnerOptions
 * @property {import('@aws-sdk/client-sqs').SQSClient} sqs
 * @property {string} queueUrl
 * @property {(event: { Records: any[] }, context: ReturnType<typeof lambdaContext>) => Promise<{ batchItemFailures?: { itemIdentifier: string }[] } | void>} handler
 * @property {string} region
 * @property {number} batchSize          messages per invocation, at most
 * @property {number} batchWindowMs      how long a batch may wait to fill up
 * @property {number} receivers          concurrent long polls
 * @property {number} concurrency        invocations at once
 * @property {number} functionTimeoutMs  what getRemainingTimeInMillis counts down from
 * @property {number} [waitTimeSeconds]  long-poll wait (default RECEIVE_WAIT_SECONDS)
 * @property {(line: object) => void} [log]
 */

/** Lambda's largest batch from a FIFO queue, which is also SQS's largest receive. */
export const FIFO_MAX_BATCH = 10;

/** A long poll's wait at the queue, and so the longest a stop waits for the polls open there. */
export const RECEIVE_WAIT_SECONDS = 2;

/**
 * Plays Lambda's SQS event-source mapping against any SQS endpoint: long polls fill batches of up
 * to `batchSize`, cut at `batchWindowMs`, handed to the handler in Lambda's event shape; only the
 * messages it did not report are deleted. A FIFO queue is played as Lambda plays one: a receive (at
 * most 10) is one batch, at once, never cut or joined, so a group's messages stay together in order.
 * A stop lets the open polls end (SQS and ElasticMQ keep an aborted one, and it would hide the next
 * messages sent for the visibility timeout), hands what it holds to the handler, then makes the
 * failed messages still hidden visible again for the next run, which Lambda has no counterpart for.
 */
export class LocalEventSource {
  /** @param {RunnerOptions} options */
  constructor(options) {
    this.options = options;
    this.log = options.log ?? ((line) => console.log(JSON.stringify(line)));
    /** @type {Message[]} */
    this.buffer = [];
    /** @type {Message[][]} FIFO: received batches waiting for a free invocation */
    this.fifoBatches = [];
    this.fifo = false;
    /** @type {NodeJS.Timeout | undefined} */
    this.windowTimer = undefined;
    /** @type {Set<Promise<void>>} */
    this.inFlight = new Set();
    this.stopping = false;
    this.totals = { batches: 0, messages: 0, deleted: 0, failed: 0, handlerErrors: 0 };
    /** @type {Map<string, number>} receipt handle of a failed message → when it becomes visible again (epoch ms) */
    this.hidden = new Map();
    this.visibilityMs = 30_000;
    /** @type {(() => void)[]} */
    this.capacityWaiters = [];
    this.bufferSince = 0;
  }

  async start() {
    const { sqs, queueUrl } = this.options;
    const attrs = await sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: ['QueueArn', 'FifoQueue', 'VisibilityTimeout'],
      }),
    );
    this.queueArn =
      attrs.Attributes?.QueueArn ??
      `arn:aws:sqs:${this.options.region}:000000000000:${queueUrl.split('/').pop()}`;
    this.fifo = attrs.Attributes?.FifoQueue === 'true' || queueUrl.endsWith('.fifo');
    this.visibilityMs = Number(attrs.Attributes?.VisibilityTimeout ?? 30) * 1000;
    this.receiving = Promise.all(
      Array.from({ length: this.options.receivers }, () => this.receiveLoop()),
    );
  }

  /** Stops polling once the open polls have answered; hands over what was received; waits for every invocation and delete. */
  async stop() {
    this.stopping = true;
    for (const wake of this.capacityWaiters.splice(0)) wake();
    await this.receiving?.catch(() => {});
    while (this.buffer.length > 0 || this.fifoBatches.length > 0 || this.inFlight.size > 0) {
      this.flush();
      await Promise.race(this.inFlight);
    }
    await this.releaseHidden();
    return this.totals;
  }

  /**
   * Makes the failed messages still hidden visible again: the visibility timeout is Lambda's backoff
   * while polling, and only delays the next run once stopped. Called once no poll is open, so none
   * takes them back; a stale handle is refused, and changes nothing.
   */
  async releaseHidden() {
    const now = Date.now();
    const handles = [...this.hidden].filter(([, until]) => until > now).map(([handle]) => handle);
    this.hidden.clear();
    let released = 0;
    for (let i = 0; i < handles.length; i += 10) {
      const entries = handles
        .slice(i, i + 10)
        .map((ReceiptHandle, n) => ({ Id: String(n), ReceiptHandle, VisibilityTimeout: 0 }));
      const out = await this.options.sqs
        .send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: this.options.queueUrl,
            Entries: entries,
          }),
        )
        .catch(() => ({ Successful: [] }));
      released += out.Successful?.length ?? 0;
    }
    if (released)
      this.log({
        level: 'info',
        msg: 'failed messages made visible again for the next run',
        count: released,
      });
  }

  async receiveLoop() {
    const { sqs, queueUrl, waitTimeSeconds = RECEIVE_WAIT_SECONDS } = this.options;
    while (!this.stopping) {
      // Back-pressure: hold no more than the invocations can take, lest messages sit out their visibility.
      await this.waitForCapacity();
      if (this.stopping) return;
      let messages;
      try {
        const out = await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: this.fifo ? Math.min(this.options.batchSize, FIFO_MAX_BATCH) : 10,
            WaitTimeSeconds: waitTimeSeconds,
            MessageSystemAttributeNames: ['All'],
            MessageAttributeNames: ['All'],
          }),
        );
        messages = out.Messages ?? [];
      } catch (err) {
        if (this.stopping) return;
        this.log({
          level: 'warn',
          msg: 'receive failed; retrying',
          error: /** @type {Error} */ (err).message,
        });
        await new Promise((r) => setTimeout(r, 1000));
        continue;
      }
      if (messages.length === 0) continue;
      if (this.fifo) {
        this.fifoBatches.push(messages);
        this.flush();
        continue;
      }
      if (this.buffer.length === 0) this.bufferSince = Date.now();
      this.buffer.push(...messages);
      this.maybeFlush();
    }
  }

  waitForCapacity() {
    const held = () =>
      this.fifo ? this.fifoBatches.length > 0 : this.buffer.length >= this.options.batchSize;
    const full = () => this.inFlight.size >= this.options.concurrency && held();
    if (!full()) return Promise.resolve();
    return new Promise((resolve) => this.capacityWaiters.push(() => resolve(undefined)));
  }

  /** Sends the buffer on when a batch is full, its window has passed, or the runner is stopping. */
  maybeFlush() {
    if (this.fifo) return this.flush();
    if (this.buffer.length === 0) return;
    const waited = Date.now() - this.bufferSince;
    if (
      this.buffer.length >= this.options.batchSize ||
      waited >= this.options.batchWindowMs ||
      this.stopping
    )
      return this.flush();
    this.windowTimer ??= setTimeout(() => {
      this.windowTimer = undefined;
      this.maybeFlush();
    }, this.options.batchWindowMs - waited);
  }

  /** Starts invocations while there are messages and free slots; a full house waits for a slot. */
  flush() {
    clearTimeout(this.windowTimer);
    this.windowTimer = undefined;
    const nextBatch = () =>
      this.fifo
        ? this.fifoBatches.shift()
        : this.buffer.length > 0
          ? this.buffer.splice(0, this.options.batchSize)
          : undefined;
    while (this.inFlight.size < this.options.concurrency) {
      const batch = nextBatch();
      if (!batch) break;
      const run = this.invoke(batch).finally(() => {
        this.inFlight.delete(run);
        for (const wake of this.capacityWaiters.splice(0)) wake();
        this.maybeFlush();
      });
      this.inFlight.add(run);
    }
  }

  /** @param {Message[]} batch */
  async invoke(batch) {
    const { queueArn = '', options } = this;
    const event = {
      Records: batch.map((m) => toLambdaRecord(m, { queueArn, region: options.region })),
    };
    /** @type {Set<string>} */
    let failed;
    try {
      const result = await options.handler(event, lambdaContext(options.functionTimeoutMs));
      failed = new Set((result?.batchItemFailures ?? []).map((f) => f.itemIdentifier));
    } catch (err) {
      // As Lambda does: a thrown error returns the whole batch to the queue.
      this.totals.handlerErrors++;
      this.log({
        level: 'warn',
        msg: 'handler failed; the batch returns to the queue',
        error: /** @type {Error} */ (err).message,
        messages: batch.length,
      });
      failed = new Set(batch.map((m) => /** @type {string} */ (m.MessageId)));
    }
    const done = batch.filter((m) => !failed.has(/** @type {string} */ (m.MessageId)));
    const now = Date.now();
    for (const [handle, at] of this.hidden) {
      // In the order they failed, so in the order they reappear: the visible ones are forgotten.
      if (at > now) break;
      this.hidden.delete(handle);
    }
    for (const m of batch)
      if (failed.has(/** @type {string} */ (m.MessageId)))
        this.hidden.set(/** @type {string} */ (m.ReceiptHandle), now + this.visibilityMs);
    await this.deleteMessages(done);
    this.totals.batches++;
    this.totals.messages += batch.length;
    this.totals.deleted += done.length;
    this.totals.failed += batch.length - done.length;
    this.log({
      level: 'info',
      msg: 'batch done',
      messages: batch.length,
      deleted: done.length,
      failed: batch.length - done.length,
      totals: this.totals,
    });
  }

  /** @param {Message[]} messages */
  async deleteMessages(messages) {
    for (let i = 0; i < messages.length; i += 10) {
      let entries = messages
        .slice(i, i + 10)
        .map((m, n) => ({ Id: String(n), ReceiptHandle: /** @type {string} */ (m.ReceiptHandle) }));
      /** @type {string[]} */
      const refused = [];
      for (let attempt = 0; entries.length > 0 && attempt < 5; attempt++) {
        const out = await this.options.sqs
          .send(
            new DeleteMessageBatchCommand({ QueueUrl: this.options.queueUrl, Entries: entries }),
          )
          .catch((err) => ({
            Failed: entries.map((e) => ({ Id: e.Id, SenderFault: false, Code: err.name })),
          }));
        const failed = out.Failed ?? [];
        // A sender fault (a stale receipt handle) fails the same way every time: only throttling and server faults are retried.
        for (const f of failed) if (f.SenderFault) refused.push(f.Code ?? 'SenderFault');
        const retry = new Set(failed.filter((f) => !f.SenderFault).map((f) => f.Id));
        entries = entries.filter((e) => retry.has(e.Id));
        if (entries.length) await new Promise((r) => setTimeout(r, 200 * 2 ** attempt));
      }
      // A message whose delete failed reappears and is stored again harmlessly (idempotent on email).
      const count = entries.length + refused.length;
      if (count)
        this.log({
          level: 'warn',
          msg: 'delete failed; the messages will reappear',
          count,
          codes: [...new Set(refused)],
        });
    }
  }
}
