import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { within } from '../../../test/support/time-factor.js';
import { SAMPLE_HASH, makeUsers, uniqueTag } from '../../../test/support/users.js';

// Another session holds what a request needs: an uncommitted insert of its email, a row locked
// FOR UPDATE, the whole table. The requests that do not need it must not wait for it, the one that
// does waits at most DB_LOCK_TIMEOUT_MS and gets 503 + Retry-After (never 500), and nothing is lost.
const LOCK_TIMEOUT_MS = 2_000;
const HOLD_MS = 5_000;
const CLIENTS = 16;
// The target for requests that need no locked row, whatever another writer holds (p99).
const OTHERS_P99_MS = 1_000;

/** @param {number[]} values @param {number} q */
const quantile = (values, q) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};
const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));

describe('another writer holds a row or the table (DB_LOCK_TIMEOUT_MS)', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
  before(async () => {
    db = await createTestDatabase();
    app = await startTestApp({
      databaseUrl: db.url,
      env: { DB_LOCK_TIMEOUT_MS: String(LOCK_TIMEOUT_MS), LOG_LEVEL: 'debug' },
    });
  });
  after(async () => {
    await app?.close();
    await db?.drop();
  });

  /** A second session, as psql or another instance would be. */
  async function otherSession() {
    const client = new pg.Client(db.url);
    client.on('error', () => {});
    await client.connect();
    return client;
  }

  /**
   * Single-user requests for fresh emails from CLIENTS clients, back to back, until `untilMs`.
   * @param {string} tag @param {number} untilMs @param {Record<string, string>} headers
   */
  async function traffic(tag, untilMs, headers) {
    /** @type {{ status: number, ms: number, email: string }[]} */
    const answers = [];
    await Promise.all(
      Array.from({ length: CLIENTS }, async (_, c) => {
        for (let i = 0; performance.now() < untilMs; i++) {
          const email = `fresh-${tag}-${c}-${i}@x.co`;
          const started = performance.now();
          const res = await app.postUsers([{ email, name: 'Fresh', passwordHash: SAMPLE_HASH }], {
            headers,
          });
          answers.push({ status: res.status, ms: performance.now() - started, email });
        }
      }),
    );
    return answers;
  }

  /**
   * The scenario: `hold` takes the lock in another session; the locked request, a client's retry
   * of it and a large request that includes the email go out, then fresh traffic for a while;
   * the lock is let go after HOLD_MS.
   * @param {{ tag: string, lockedEmail: string, hold: (s: pg.Client) => Promise<void>, headers?: Record<string, string> }} o
   */
  async function underLock({ tag, lockedEmail, hold, headers = {} }) {
    const holder = await otherSession();
    await holder.query('BEGIN');
    await hold(holder);
    const heldAt = performance.now();
    const locked = { email: lockedEmail, name: 'Sent', passwordHash: SAMPLE_HASH };
    /** @param {unknown} body */
    const timed = async (body) => {
      const started = performance.now();
      const res = await app.postUsers(body, { headers });
      return { ...res, ms: performance.now() - started };
    };
    const lockedAnswer = timed([locked]);
    await sleep(20);
    const retryAnswer = timed([locked]);
    const large = [...makeUsers(999, tag), locked];
    const largeAnswer = timed(large);
    const fresh = await traffic(tag, heldAt + HOLD_MS - 500, headers);
    await sleep(Math.max(0, heldAt + HOLD_MS - performance.now()));
    await holder.query('COMMIT');
    await holder.end();
    return {
      lockedAnswer: await lockedAnswer,
      retryAnswer: await retryAnswer,
      largeAnswer: await largeAnswer,
      large,
      fresh,
    };
  }

  /** @param {{ status: number, headers: Headers, body: any, ms: number }} res @param {string} what */
  function assertWrittenOrLockedOut(res, what) {
    if (res.status === 503) {
      assert.equal(res.body.error, 'lock_timeout', `${what}: ${JSON.stringify(res.body)}`);
      assert.equal(res.headers.get('retry-after'), '1', what);
      // Its own wait is bounded: a brief try in a group, a brief one alone, then DB_LOCK_TIMEOUT_MS.
      assert.ok(
        res.ms < 2 * LOCK_TIMEOUT_MS + within(1_000),
        `${what} answered after ${Math.round(res.ms)} ms`,
      );
    } else {
      assert.ok(
        res.status === 200 || res.status === 201,
        `${what}: ${res.status} ${JSON.stringify(res.body)}`,
      );
    }
  }

  /** @param {{ status: number, ms: number, email: string }[]} fresh @param {string} what */
  async function assertFreshServed(fresh, what) {
    const p99 = quantile(
      fresh.map((a) => a.ms),
      0.99,
    );
    console.error(
      `[row-locks] ${what}: ${fresh.length} fresh requests while locked, p50 ${Math.round(
        quantile(
          fresh.map((a) => a.ms),
          0.5,
        ),
      )} ms, p99 ${Math.round(p99)} ms`,
    );
    assert.ok(fresh.length >= CLIENTS * 5, `fresh traffic flowed: ${fresh.length} requests`);
    assert.deepEqual(
      [...new Set(fresh.map((a) => a.status))],
      [201],
      'every fresh request written',
    );
    assert.ok(
      p99 < within(OTHERS_P99_MS),
      `requests for other emails are not held back: p99 ${Math.round(p99)} ms`,
    );
    const stored = await db.usersByEmail(fresh.map((a) => a.email));
    assert.equal(stored.size, fresh.length, 'every acknowledged user is stored');
  }

  function assertLogClean() {
    const log = JSON.stringify(app.logs);
    assert.ok(!log.includes('@x.co') && !log.includes('@example.com'), 'no email in the log');
    assert.ok(!log.includes(SAMPLE_HASH.slice(0, 20)), 'no password hash in the log');
    assert.ok(
      app.logs.some((l) => l.msg === 'locked out by another writer' && l.err?.code === '55P03'),
      'a lock timeout is logged, by its SQLSTATE',
    );
    assert.deepEqual(
      app.logs.filter((l) => l.level >= 50),
      [],
      'nothing logged as an error',
    );
  }

  test('an uncommitted insert of one email: the others are served at once, that email waits at most DB_LOCK_TIMEOUT_MS, nothing is lost', async () => {
    const tag = uniqueTag();
    const lockedEmail = `locked-${tag}@x.co`;
    const r = await underLock({
      tag,
      lockedEmail,
      hold: async (s) => {
        await s.query("INSERT INTO users (email, name) VALUES ($1, 'Holder')", [lockedEmail]);
      },
    });
    assertWrittenOrLockedOut(r.lockedAnswer, 'the locked request');
    assertWrittenOrLockedOut(r.retryAnswer, 'its retry');
    assert.equal(r.lockedAnswer.status, 503, 'the lock outlived DB_LOCK_TIMEOUT_MS');
    assert.equal(r.largeAnswer.status, 503, 'the large request that holds the email too');
    assert.equal(r.largeAnswer.body.error, 'lock_timeout');
    await assertFreshServed(r.fresh, 'uncommitted insert');
    assert.equal(
      (await db.usersByEmail(r.large.slice(0, 999).map((u) => u.email))).size,
      0,
      'the large request refused is not half-written',
    );
    // Retried once the lock is let go, as a client told Retry-After would.
    const again = await app.postUsers(r.large);
    assert.equal(again.status, 201, again.text);
    assert.deepEqual(again.body, { received: 1000, inserted: 999, updated: 0, duplicates: 1 });
    assert.equal(
      (await db.usersByEmail([lockedEmail])).get(lockedEmail)?.name,
      'Holder',
      'the other writer committed first',
    );
    assertLogClean();
  });

  test('a row held FOR UPDATE under merge-duplicates: the same, and the merge lands after the lock', async () => {
    const tag = uniqueTag();
    const lockedEmail = `held-${tag}@x.co`;
    assert.equal((await app.postUsers([{ email: lockedEmail, name: 'Before' }])).status, 201);
    const merge = { Prefer: 'resolution=merge-duplicates' };
    const r = await underLock({
      tag,
      lockedEmail,
      headers: merge,
      hold: async (s) => {
        await s.query('SELECT * FROM users WHERE email = $1 FOR UPDATE', [lockedEmail]);
      },
    });
    assertWrittenOrLockedOut(r.lockedAnswer, 'the locked request');
    assertWrittenOrLockedOut(r.retryAnswer, 'its retry');
    assert.equal(r.largeAnswer.status, 503, 'the large request that holds the email too');
    await assertFreshServed(r.fresh, 'FOR UPDATE');
    const again = await app.postUsers(
      [{ email: lockedEmail, name: 'Sent', passwordHash: SAMPLE_HASH }],
      { headers: merge },
    );
    assert.equal(again.status, 200, again.text);
    assert.equal((await db.usersByEmail([lockedEmail])).get(lockedEmail)?.name, 'Sent');
    assertLogClean();
  });

  test('the whole table locked (an index built without CONCURRENTLY): everyone gets 2xx or 503 + Retry-After, and retries store everyone', async () => {
    const holder = await otherSession();
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE users IN SHARE MODE');
    const users = makeUsers(40);
    const started = performance.now();
    const first = await Promise.all(users.map((u) => app.postUsers([u])));
    const ms = performance.now() - started;
    await holder.query('COMMIT');
    await holder.end();
    for (const res of first) assertWrittenOrLockedOut({ ...res, ms }, 'under a table lock');
    assert.ok(
      first.some((res) => res.status === 503),
      'the table lock was felt',
    );
    const refused = users.filter((_, i) => first[i].status === 503);
    const retried = await Promise.all(refused.map((u) => app.postUsers([u])));
    assert.deepEqual([...new Set(retried.map((res) => res.status))], [201]);
    assert.equal(
      (await db.usersByEmail(users.map((u) => u.email))).size,
      users.length,
      'everyone stored after the retries',
    );
  });
});
