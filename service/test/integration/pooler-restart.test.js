// The transaction pooler (a real PgBouncer) restarted while the service writes through it: every
// connection dropped at once, nothing listening for a second, then the same pooler again, as in a
// pooler's crash or redeploy. Requests meanwhile are answered 503 + Retry-After (never 500, never a
// hang), writes resume by themselves, and every user of every acknowledged request is stored.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { startPgBouncer } from '../../../test/support/pgbouncer.js';
import { within } from '../../../test/support/time-factor.js';
import { SAMPLE_HASH, makeUsers, uniqueTag } from '../../../test/support/users.js';

const DOWN_MS = 1_000;
// Generous: this guards against a hang, it does not measure speed.
const NO_HANG_MS = 10_000;
const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));

describe('the pooler restarted under load', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startPgBouncer>>} */ let pooler;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
  before(async () => {
    db = await createTestDatabase();
    pooler = await startPgBouncer({ upstreamUrl: db.url, poolSize: 4 });
    app = await startTestApp({ databaseUrl: pooler.url, env: { DB_CONNECT_TIMEOUT_MS: '1000' } });
  });
  after(async () => {
    await app?.close();
    await pooler?.stop();
    await db?.drop();
  });

  test('503 + Retry-After while it is down, writes resume by themselves, nothing acknowledged is lost', async () => {
    /** @type {{ status: number, retryAfter: string | null, error?: string, ms: number, at: number, emails: string[] }[]} */
    const answers = [];
    const tag = uniqueTag();
    const started = performance.now();
    // Load runs until a while after the pooler is back (the restart shortens it), bounded in any case.
    let until = started + within(20_000);
    /** @param {object[]} users @param {Record<string, string>} [headers] */
    const send = async (users, headers) => {
      const at = performance.now();
      const res = await app.postUsers(users, { headers });
      answers.push({
        status: res.status,
        retryAfter: res.headers.get('retry-after'),
        error: res.body?.error,
        ms: performance.now() - at,
        at: at - started,
        emails: users.map((u) => /** @type {{ email: string }} */ (u).email),
      });
    };
    // 8 clients of single users (group commit), 2 of 1000-user batches, one of them in merge mode.
    const singles = Array.from({ length: 8 }, async (_, c) => {
      for (let i = 0; performance.now() < until; i++) await send(makeUsers(1, `${tag}-s${c}-${i}`));
    });
    const batches = Array.from({ length: 2 }, async (_, c) => {
      for (let i = 0; performance.now() < until; i++)
        await send(
          makeUsers(1000, `${tag}-b${c}-${i}`),
          c === 1 ? { Prefer: 'resolution=merge-duplicates' } : undefined,
        );
    });
    const restart = (async () => {
      await sleep(1_500);
      const down = performance.now() - started;
      const readyWhileDown = sleep(DOWN_MS / 2).then(() =>
        fetch(`${app.baseUrl}/readyz`, { signal: AbortSignal.timeout(NO_HANG_MS) }),
      );
      await pooler.restart({ downMs: DOWN_MS });
      until = Math.min(until, performance.now() + within(2_000));
      return {
        down,
        up: performance.now() - started,
        readyWhileDown: (await readyWhileDown).status,
      };
    })();
    const [{ down, up, readyWhileDown }] = await Promise.all([restart, ...singles, ...batches]);

    const by = Object.groupBy(answers, (a) => String(a.status));
    console.error(
      `[pooler-restart] down at ${Math.round(down)} ms, up at ${Math.round(up)} ms: ${Object.entries(
        by,
      )
        .map(([s, list]) => `${list?.length} × ${s}`)
        .join(', ')}`,
    );
    for (const a of answers) {
      assert.ok(
        a.status === 201 || a.status === 200 || a.status === 503,
        `answered ${a.status} ${a.error ?? ''}`,
      );
      assert.ok(a.ms < NO_HANG_MS, `answered after ${Math.round(a.ms)} ms`);
      if (a.status === 503) {
        assert.ok(a.retryAfter, 'a 503 says when to retry');
        // outcome_unknown: the pooler went away after the write was sent (it may have committed).
        assert.ok(
          ['database_unavailable', 'outcome_unknown', 'lock_timeout', 'statement_timeout'].includes(
            /** @type {string} */ (a.error),
          ),
          `503 ${a.error}`,
        );
      }
    }
    assert.ok((by['503']?.length ?? 0) > 0, 'the restart was felt');
    assert.equal(readyWhileDown, 503, '/readyz says not ready while the pooler is down');
    // Resumed by itself: soon after the pooler is back a request is written, and every request sent
    // after that one is written too.
    const resumed = Math.min(
      ...answers.filter((a) => a.at > up && a.status === 201).map((a) => a.at),
    );
    assert.ok(
      resumed - up < within(1_000),
      `first write ${Math.round(resumed - up)} ms after the pooler was back`,
    );
    const afterwards = answers.filter((a) => a.at > resumed);
    assert.ok(afterwards.length > 20, `requests after the restart: ${afterwards.length}`);
    assert.deepEqual(
      [...new Set(afterwards.map((a) => a.status))],
      [201],
      'written again without a restart of the service',
    );
    assert.equal((await fetch(`${app.baseUrl}/readyz`)).status, 200);

    const acknowledged = answers.filter((a) => a.status < 300).flatMap((a) => a.emails);
    const stored = await db.usersByEmail(acknowledged);
    assert.equal(stored.size, acknowledged.length, 'every user of every 2xx is stored');
    // Every refusal that said "nothing was written" is true (each request had emails of its own).
    const refused = answers
      .filter((a) => a.status === 503 && a.error !== 'outcome_unknown')
      .flatMap((a) => a.emails);
    assert.equal(
      (await db.usersByEmail(refused)).size,
      0,
      'a 503 that said nothing was written stored nothing',
    );

    const log = JSON.stringify(app.logs);
    assert.ok(
      !log.includes('@example.com') &&
        !log.includes(SAMPLE_HASH.slice(0, 20)) &&
        !log.includes(':postgres@'),
      'no email, hash or password in the log',
    );
    assert.ok(
      app.logs.some((l) => l.msg === 'database unavailable'),
      'the outage is logged',
    );
    assert.deepEqual(
      app.logs.filter((l) => l.level >= 50),
      [],
      'nothing logged as an error (no 500)',
    );
  });
});
