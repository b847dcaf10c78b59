// `npm run elasticmq` prints every queue it makes, the FIFO pair too, each URL one that answers.
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { freePort } from '@sluice/db/local-postgres';
import { runNode } from '../../../test/support/child-process.js';
import { DEFAULT_QUEUES } from '../../local/elasticmq/elasticmq.js';
import { waitUntil } from '../support/queues.js';

const COMMAND = fileURLToPath(new URL('../../local/bin/elasticmq.js', import.meta.url));

test('npm run elasticmq: the endpoint and every queue, FIFO ones included, in plain text; Ctrl-C stops it', async () => {
  const port = await freePort();
  const run = runNode([COMMAND], { env: { ...process.env, ELASTICMQ_PORT: String(port) } });
  const sqs = new SQSClient({
    endpoint: `http://127.0.0.1:${port}`,
    region: 'us-east-1',
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  });
  try {
    await waitUntil(
      () => run.out().includes('Ctrl-C stops it') || run.child.exitCode !== null,
      'ElasticMQ to be ready',
      90_000,
    );
    const out = run.out();
    assert.ok(!(out + run.err()).includes('\x1b'), 'no escape code');
    for (const queue of DEFAULT_QUEUES) {
      const url = `http://127.0.0.1:${port}/000000000000/${queue.name}`;
      assert.match(
        out,
        new RegExp(`^ {2}(FIFO )?(dead-letter )?queue +${url.replaceAll('.', '\\.')} `, 'm'),
        `${queue.name} is listed:\n${out}`,
      );
      const { Attributes } = await sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['FifoQueue'] }),
      );
      assert.equal(Attributes?.FifoQueue === 'true', Boolean(queue.fifo), `${queue.name}'s kind`);
    }
    assert.ok(
      DEFAULT_QUEUES.some((q) => q.fifo),
      'a FIFO pair is made',
    );
  } finally {
    sqs.destroy();
    run.child.kill('SIGINT');
  }
  assert.equal(await run.exited, 0, run.err());
  assert.match(run.err(), /elasticmq: stopped\n$/);
});
