import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useAppBehindToxiproxy } from '../../../test/support/fixture.js';
import { SAMPLE_HASH, makeUsers, uniqueTag } from '../../../test/support/users.js';
import { waitUntil } from '../../../test/support/wait.js';

// PostgreSQL's answers withheld (Toxiproxy, the downstream way only) while writes are in flight:
// each statement already sent reaches PostgreSQL, runs and commits, and its answer never comes.
// The watchdog then cuts the connections (db/watchdog.js). This is what a pause (SIGSTOP) or a
// network cut after the statement was sent looks like from the service. Every answer's claim is
// then checked against the table: "nothing was written" must be true, an answer that says the write
// may have happened may go either way, every 2xx has its rows.
const ANSWER_WITHIN_MS = 10_000;

describe('the connection lost after the write was sent (answers withheld by Toxiproxy)', () => {
  const ctx = useAppBehindToxiproxy({ LOG_LEVEL: 'debug', DB_CONNECT_TIMEOUT_MS: '1000' });
  const idleConnections = async () => {
    const text = await (await fetch(`${ctx.app.baseUrl}/metrics`)).text();
    return Number(/^sluice_db_pool_connections\{state="idle"\} (\d+)$/m.exec(text)?.[1] ?? 0);
  };

  test('a single user (group commit) and a 500-user batch: 503 outcome_unknown, and they were written; nothing said "nothing was written" of a written row', async () => {
    const tag = uniqueTag();
    // Connections in the pool, open before the fault: the writes go out on them at once.
    for (let round = 0; (await idleConnections()) < 6; round++) {
      assert.ok(round < 5, 'the pool keeps 6 connections open');
      // Batches take at most half the pool (the write gate), single users group commit's two.
      const warm = await Promise.all([
        ...Array.from({ length: 8 }, (_, i) =>
          ctx.app.postUsers(makeUsers(500, `${tag}-warm-${round}-${i}`)),
        ),
        ...Array.from({ length: 8 }, (_, i) =>
          ctx.app.postUsers(makeUsers(1, `${tag}-warm-single-${round}-${i}`)),
        ),
      ]);
      assert.deepEqual(
        warm.map((r) => r.status),
        Array(16).fill(201),
      );
    }

    await ctx.proxy.withhold('downstream');
    /** @type {{ label: string, emails: string[], send: () => ReturnType<typeof ctx.app.postUsers> }[]} */
    const requests = [];
    /** @param {string} label @param {{ email: string }[]} users @param {(users: any[]) => ReturnType<typeof ctx.app.postUsers>} [send] */
    const request = (label, users, send = (u) => ctx.app.postUsers(u)) =>
      requests.push({ label, emails: users.map((u) => u.email), send: () => send(users) });
    request('single', [{ email: `single-${tag}@x.co`, name: 'Single', passwordHash: SAMPLE_HASH }]);
    request('another single', [{ email: `single-${tag}-2@x.co`, name: 'Another' }]);
    request('500-user batch', makeUsers(500, `${tag}-batch`));
    // 2,500 users are three statements in one transaction: its BEGIN was sent, never its COMMIT.
    request('2,500-user batch', makeUsers(2500, `${tag}-large`));
    request('NDJSON import', makeUsers(3, `${tag}-ndjson`), (users) =>
      ctx.app.postUsers(users.map((u) => JSON.stringify(u)).join('\n'), {
        contentType: 'application/x-ndjson',
      }),
    );
    const started = performance.now();
    const answers = await Promise.all(
      requests.map(async (r) => ({ ...r, res: await r.send(), ms: performance.now() - started })),
    );
    // While PostgreSQL cannot be reached: refused before anything is sent.
    const during = makeUsers(1, `${tag}-during`);
    const refused = {
      label: 'during the outage',
      emails: during.map((u) => u.email),
      res: await ctx.app.postUsers(during),
      ms: 0,
    };

    await ctx.proxy.heal();
    await waitUntil(
      async () => (await fetch(`${ctx.app.baseUrl}/readyz`)).status === 200,
      '/readyz to answer 200 again',
      ANSWER_WITHIN_MS,
      100,
    );

    const all = [...answers, refused];
    console.error(
      `[outcome-in-doubt] ${all.map((a) => `${a.label}: ${a.res.status} ${a.res.body?.error ?? ''} (${Math.round(a.ms)} ms)`).join('; ')}`,
    );
    for (const a of all) {
      assert.ok(a.ms < ANSWER_WITHIN_MS, `${a.label} answered within ${ANSWER_WITHIN_MS} ms`);
      const stored = await ctx.db.usersByEmail(a.emails);
      if (a.res.status < 300) {
        assert.equal(
          stored.size,
          a.emails.length,
          `${a.label}: answered ${a.res.status}, every row stored`,
        );
      } else {
        assert.equal(a.res.status, 503, `${a.label}: ${a.res.text}`);
        assert.equal(a.res.headers.get('retry-after'), '2', `${a.label}: Retry-After`);
        assert.ok(
          ['database_unavailable', 'outcome_unknown'].includes(a.res.body.error),
          `${a.label}: ${a.res.text}`,
        );
        if (/nothing was written/.test(a.res.body.message))
          assert.equal(
            stored.size,
            0,
            `${a.label} said "${a.res.body.message}", yet ${stored.size} rows are stored`,
          );
        else
          assert.ok(
            stored.size === 0 || stored.size === a.emails.length,
            `${a.label}: all or nothing`,
          );
      }
    }

    // What the issue saw: these were sent, so PostgreSQL committed them; the answer says it may have.
    const byLabel = Object.fromEntries(all.map((a) => [a.label, a]));
    for (const label of ['single', 'another single', '500-user batch']) {
      assert.equal(
        byLabel[label].res.body?.error,
        'outcome_unknown',
        `${label}: ${byLabel[label].res.text}`,
      );
      assert.match(byLabel[label].res.body.message, /may have been written; retrying is safe/);
      assert.equal(
        byLabel[label].res.body.code,
        '08007',
        "PostgreSQL's transaction_resolution_unknown, for PostgREST's clients",
      );
      assert.equal(
        (await ctx.db.usersByEmail(byLabel[label].emails)).size,
        byLabel[label].emails.length,
        `${label} was committed`,
      );
    }
    // Its COMMIT was never sent: provably nothing written, and the answer says so.
    for (const label of ['2,500-user batch', 'NDJSON import']) {
      assert.equal(
        byLabel[label].res.body?.error,
        'database_unavailable',
        `${label}: ${byLabel[label].res.text}`,
      );
    }

    // Retrying an in-doubt request is safe: answered, its rows stored once.
    for (const a of all.filter((x) => x.res.body?.error === 'outcome_unknown')) {
      const again = await requests.find((r) => r.label === a.label)?.send();
      assert.ok(again && again.status < 300, `${a.label} retried: ${again?.text}`);
      assert.equal(again.body.received, a.emails.length);
      assert.equal(again.body.inserted + again.body.duplicates, a.emails.length);
    }
    const { rows } = await ctx.db.pool.query(
      'SELECT count(*)::int AS n, count(DISTINCT email)::int AS emails FROM users',
    );
    assert.equal(rows[0].n, rows[0].emails, 'no email stored twice');

    const log = JSON.stringify(ctx.app.logs);
    assert.ok(!log.includes('@x.co') && !log.includes('@example.com'), 'no email in the log');
    assert.ok(!log.includes(SAMPLE_HASH.slice(0, 20)), 'no password hash in the log');
    assert.ok(
      !log.includes(new URL(ctx.db.url).password || '\u0000'),
      'no database password in the log',
    );
    assert.deepEqual(
      ctx.app.logs.filter((l) => l.level >= 50),
      [],
      'nothing logged as an error',
    );
    assert.ok(
      ctx.app.logs.some(
        (l) => l.msg === 'connection lost after the commit was sent: outcome unknown',
      ),
      'the doubt is logged',
    );
  });
});
