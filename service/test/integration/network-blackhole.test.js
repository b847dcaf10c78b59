import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useAppBehindToxiproxy } from '../../../test/support/fixture.js';
import { within } from '../../../test/support/time-factor.js';
import { SAMPLE_HASH, makeUsers, uniqueTag } from '../../../test/support/users.js';
import { waitUntil } from '../../../test/support/wait.js';

// Packets to PostgreSQL dropped, nothing closed: what a network partition or a failover that leaves
// the old connections dead looks like from the service. No TCP error comes; only time tells.
const BLACKHOLE_MS = 15_000;
const AFTER_MS = 8_000;
// Every answer within this, outage or not; writing resumes within it once the network is back.
const ANSWER_WITHIN_MS = 10_000;
const CLIENTS = 8;

const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));

describe('a network blackhole between the service and PostgreSQL (Toxiproxy)', () => {
  const ctx = useAppBehindToxiproxy({ LOG_LEVEL: 'debug' });

  test('15 s of dropped packets: every answer within 10 s (503 + Retry-After while it lasts), writing resumes within 10 s, nothing acknowledged is lost', async () => {
    const tag = uniqueTag();
    assert.equal((await ctx.app.postUsers(makeUsers(10, `${tag}-warm`))).status, 201);

    /** @type {{ status: number, retryAfter: string | null, error: string | undefined, startedAt: number, ms: number, emails: string[] }[]} */
    const answers = [];
    let stop = false;
    /** @param {() => { email: string }[]} nextBatch */
    const client = async (nextBatch) => {
      while (!stop) {
        const users = nextBatch();
        const startedAt = performance.now();
        const res = await ctx.app.postUsers(users);
        answers.push({
          status: res.status,
          retryAfter: res.headers.get('retry-after'),
          error: res.body?.error,
          startedAt,
          ms: performance.now() - startedAt,
          emails: users.map((u) => u.email),
        });
        if (res.status === 503) await sleep(200);
      }
    };
    let n = 0;
    const single = () => [
      { email: `single-${tag}-${n++}@x.co`, name: 'Single', passwordHash: SAMPLE_HASH },
    ];
    const batch = () => makeUsers(1000, `${tag}-batch-${n++}`);
    const load = Promise.all([
      ...Array.from({ length: CLIENTS }, () => client(single)),
      client(batch),
    ]);

    await waitUntil(
      () => answers.filter((a) => a.status === 201).length >= CLIENTS,
      'writes flowing before the packets stop',
      within(10_000),
      50,
    );
    await ctx.proxy.blackhole();
    const blackholedAt = performance.now();
    await waitUntil(
      async () =>
        (
          await fetch(`${ctx.app.baseUrl}/readyz`, {
            signal: AbortSignal.timeout(ANSWER_WITHIN_MS),
          })
        ).status === 503,
      '/readyz to say not ready while PostgreSQL cannot be reached',
      within(ANSWER_WITHIN_MS),
    );
    // The packets stay dropped for BLACKHOLE_MS: the scenario's length, not a wait for a state.
    await sleep(BLACKHOLE_MS - (performance.now() - blackholedAt));
    await ctx.proxy.heal();
    const healedAt = performance.now();
    await waitUntil(
      () => answers.some((a) => a.startedAt >= healedAt && a.status === 201),
      'a write after the network came back',
      within(ANSWER_WITHIN_MS),
    );
    await sleep(AFTER_MS - (performance.now() - healedAt));
    stop = true;
    await load;

    const slowest = Math.max(...answers.map((a) => a.ms));
    const during = answers.filter(
      (a) => a.startedAt >= blackholedAt && a.startedAt + a.ms <= healedAt,
    );
    const firstWriteAfter = answers
      .filter((a) => a.startedAt >= healedAt && a.status === 201)
      .map((a) => a.startedAt + a.ms - healedAt);
    /** @type {Record<string, typeof answers>} */
    const byStatus = {};
    for (const a of answers) (byStatus[a.status] ??= []).push(a);
    console.error(
      `[blackhole] ${answers.length} answers: ${Object.entries(byStatus)
        .map(([s, list]) => `${s} × ${list.length}`)
        .join(', ')}; slowest ${Math.round(slowest)} ms; ` +
        `first write ${Math.round(Math.min(...firstWriteAfter))} ms after the network came back`,
    );

    assert.ok(
      slowest < ANSWER_WITHIN_MS,
      `every answer within ${ANSWER_WITHIN_MS} ms, the slowest took ${Math.round(slowest)} ms`,
    );
    assert.deepEqual(
      Object.keys(byStatus).sort(),
      ['201', '503'],
      'only written or 503, never 500',
    );
    // A write in flight when the packets stopped may have been committed (outcome_unknown); any
    // other 503 said nothing was written, and must be right.
    for (const a of byStatus['503'] ?? []) {
      assert.ok(a.error === 'database_unavailable' || a.error === 'outcome_unknown', a.error);
      assert.equal(a.retryAfter, '2');
    }
    assert.ok(
      during.length > 0 && during.every((a) => a.status === 503),
      'answered 503 while the packets were dropped',
    );
    assert.ok(
      firstWriteAfter.length > 0 && Math.min(...firstWriteAfter) < ANSWER_WITHIN_MS,
      'writing resumed within 10 s',
    );

    const acknowledged = answers.filter((a) => a.status === 201).flatMap((a) => a.emails);
    const stored = await ctx.db.usersByEmail(acknowledged);
    assert.equal(stored.size, acknowledged.length, 'every acknowledged user is stored');
    const saidNothing = (byStatus['503'] ?? [])
      .filter((a) => a.error === 'database_unavailable')
      .flatMap((a) => a.emails);
    assert.equal(
      (await ctx.db.usersByEmail(saidNothing)).size,
      0,
      'no user of a "nothing was written" answer is stored',
    );

    const log = JSON.stringify(ctx.app.logs);
    assert.ok(!log.includes('@x.co') && !log.includes('@example.com'), 'no email in the log');
    assert.ok(!log.includes(SAMPLE_HASH.slice(0, 20)), 'no password hash in the log');
    assert.deepEqual(
      ctx.app.logs.filter((l) => l.level >= 50),
      [],
      'nothing logged as an error',
    );
    assert.ok(
      ctx.app.logs.some((l) => l.msg === 'database unreachable: cut the connections in flight'),
      'the cut is logged',
    );
  });
});
