import assert from 'node:assert/strict';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { after, describe, test } from 'node:test';
import { POISON_TRIGGER } from '../../../test/support/database.js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { SAMPLE_HASH, uniqueTag } from '../../../test/support/users.js';
import { startFeeder } from '../support/pipeline.js';
import { createQueuePair, makeSqsClient, waitUntil } from '../support/queues.js';

describe('poison messages', () => {
  const sqs = makeSqsClient();
  const ctx = useAppAndDatabase({ LOG_LEVEL: 'warn' });
  after(() => sqs.destroy());

  /** Every message in the dead-letter queue, by body. @param {string} dlqUrl @param {number} expected */
  async function drainDlq(dlqUrl, expected) {
    /** @type {string[]} */ const bodies = [];
    for (let i = 0; i < 10 && bodies.length < expected; i++) {
      const out = await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: dlqUrl,
          MaxNumberOfMessages: 10,
          WaitTimeSeconds: 1,
        }),
      );
      bodies.push(...(out.Messages ?? []).map((m) => /** @type {string} */ (m.Body)));
    }
    return bodies;
  }

  test('10 malformed messages among 10,000 good ones: every good user stored, only the 10 in the DLQ', async (t) => {
    // A short visibility timeout, so the poison reappears (and reaches maxReceiveCount) quickly.
    const queues = await createQueuePair(sqs, { visibilityTimeoutSeconds: 1, maxReceiveCount: 3 });
    const good = Array.from({ length: 10_000 }, (_, i) =>
      JSON.stringify({ email: `good-${i}@example.com`, name: `Good ${i}` }),
    );
    const poison = [
      ...Array.from({ length: 5 }, (_, i) => `{"email": "broken-${i}@example.com", "name": `),
      ...Array.from({ length: 5 }, (_, i) =>
        JSON.stringify([
          { email: `fine-${i}@example.com`, name: 'Fine' },
          { email: `not-an-email-${i}`, name: 'Bad' },
        ]),
      ),
    ];
    const bodies = [...good];
    poison.forEach((p, i) => bodies.splice((i + 1) * 900, 0, p));
    await queues.send(bodies);

    // Refused, not set aside: a message with an invalid user is poison (quarantine.test.js: the default).
    const { stop } = await startFeeder({
      sqs,
      queueUrl: queues.queueUrl,
      serviceUrl: ctx.app.baseUrl,
      env: { INVALID_USERS: 'refuse' },
    });
    t.after(stop);
    await waitUntil(
      async () =>
        (await queues.depth(queues.dlqUrl)) === 10 && (await queues.depth(queues.queueUrl)) === 0,
      'the 10 poison messages in the DLQ',
      120_000,
    );
    await stop();

    assert.equal(
      await ctx.db.countUsers(),
      10_000,
      'every good user, and no user of a poison message',
    );
    assert.deepEqual((await drainDlq(queues.dlqUrl, 10)).sort(), [...poison].sort());
    await queues.delete();
  });

  // Hostile input through the queue: 200 good messages of 100 users, and 5 messages each holding one bad user among 99
  // good ones. Before: 17,300 of the 20,000 good users stored after two minutes, and 27 good
  // messages in the DLQ. The bad user comes in both kinds: one the validator refuses (a NUL in the
  // hash, 400 naming it) and one only PostgreSQL refuses (a trigger, the service's own 500).
  for (const [kind, badUser] of /** @type {const} */ ([
    [
      'a NUL in passwordHash (400)',
      (/** @type {string} */ email) => ({
        email,
        name: 'Bad',
        passwordHash: `${SAMPLE_HASH}\u0000`,
      }),
    ],
    [
      'a row PostgreSQL refuses (500)',
      (/** @type {string} */ email) => ({ email, name: 'poison-XX000' }),
    ],
  ])) {
    test(`5 messages with ${kind} among 200 good ones: every good user stored, only the 5 in the DLQ`, async (t) => {
      await ctx.db.pool.query(POISON_TRIGGER).catch((/** @type {any} */ err) => {
        if (err.code !== '42723') throw err; // the trigger's function exists: the first case made it
      });
      const queues = await createQueuePair(sqs, {
        visibilityTimeoutSeconds: 1,
        maxReceiveCount: 3,
      });
      const tag = uniqueTag();
      const message = (/** @type {number} */ m, /** @type {number} */ bad) =>
        JSON.stringify(
          Array.from({ length: 100 }, (_, u) =>
            u === bad
              ? badUser(`bad-${tag}-${m}@example.com`)
              : { email: `p-${tag}-${m}-${u}@example.com`, name: `P ${m}.${u}` },
          ),
        );
      const good = Array.from({ length: 200 }, (_, m) => message(m, -1));
      const poisoned = Array.from({ length: 5 }, (_, i) => message(200 + i, 17 + i * 13));
      const bodies = [...good];
      poisoned.forEach((p, i) => bodies.splice((i + 1) * 35, 0, p));
      await queues.send(bodies);

      const { stop, handlerLogs } = await startFeeder({
        sqs,
        queueUrl: queues.queueUrl,
        serviceUrl: ctx.app.baseUrl,
        env: { INVALID_USERS: 'refuse' },
      });
      t.after(stop);
      const storedOfRun = async () =>
        (
          await ctx.db.pool.query('SELECT count(*)::int AS n FROM users WHERE email LIKE $1', [
            `p-${tag}-%`,
          ])
        ).rows[0].n;
      await waitUntil(
        async () =>
          (await queues.depth(queues.dlqUrl)) === 5 && (await queues.depth(queues.queueUrl)) === 0,
        'the 5 poisoned messages in the DLQ',
        120_000,
      );
      await stop();

      assert.equal(
        await storedOfRun(),
        20_000,
        'every user of the 200 good messages, none of a poisoned one',
      );
      assert.deepEqual(
        (await drainDlq(queues.dlqUrl, 5)).sort(),
        [...poisoned].sort(),
        'only the poisoned messages reached the DLQ',
      );
      const reasons = handlerLogs
        .filter((l) => l.message === 'messages not stored')
        .flatMap((l) => l.failures.map((/** @type {any} */ f) => f.reason));
      assert.ok(
        reasons.length > 0 &&
          reasons.every((r) =>
            kind.includes('400') ? /passwordHash/.test(r) : /error id/.test(r),
          ),
        JSON.stringify(reasons.slice(0, 3)),
      );
      await queues.delete();
    });
  }
});
