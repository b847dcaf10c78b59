import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { makeUsers, uniqueTag } from '../../../test/support/users.js';

// `Prefer: invalid=quarantine` with an Idempotency-Key against the real PostgreSQL: the retry (after
// the first answer, or at the same time) gets the first answer replayed, and the quarantine holds each
// invalid item once, naming the first request (its id, position, time, times_seen 1); the users table
// is what the first attempt left. JSON, NDJSON and CSV. (The first answer lost: idempotency-in-doubt.)

const TOKENS = { feeder: 'feeder-token-0123456789abcdef' };
const NDJSON = 'application/x-ndjson';
const CSV = 'text/csv';
const PLAINTEXT = 'correct-horse-battery-staple-';

/** @param {string} key */
const keyed = (key) => ({ 'idempotency-key': `"${key}"`, prefer: 'invalid=quarantine' });

/** What a replay must repeat. @param {Awaited<ReturnType<Awaited<ReturnType<typeof import('../../../test/support/app.js').startTestApp>>['postUsers']>>} res */
const asSent = (res) => ({
  status: res.status,
  text: res.text,
  contentType: res.headers.get('content-type'),
  applied: res.headers.get('preference-applied'),
});

/** Every column of both tables, so that a retry that touched a row (a times_seen, a request id, a time) shows. @param {import('pg').Pool} pool */
async function tables(pool) {
  const users = await pool.query('SELECT * FROM users ORDER BY email');
  const kept = await pool.query('SELECT * FROM quarantined_items ORDER BY id');
  return { users: users.rows, kept: kept.rows };
}

/**
 * A body of each format with good users and invalid items of every kind it can hold, and how many are invalid.
 * @param {string} tag @returns {{ label: string, contentType: string, body: string, received: number, good: string[], invalid: number }[]}
 */
function bodies(tag) {
  const password = `${PLAINTEXT}${tag}`;
  const good = makeUsers(4, tag);
  const json = [
    good[0],
    { email: `no-at-${tag}`, name: 'J' },
    good[1],
    { email: `pw-${tag}@example.com`, name: 'P', password },
    42,
    { email: `typo-${tag}@example.com`, nome: 'T' },
  ];
  const ndjson = [
    JSON.stringify(good[2]),
    `{"email": "broken-${tag}@example.com", "name": `,
    JSON.stringify({ email: `nd-no-at-${tag}`, name: 'N' }),
    `{"email":"twice-${tag}@example.com","name":"A","name":"B"}`,
    JSON.stringify(good[3]),
  ];
  const csvGood = makeUsers(2, `${tag}c`);
  const csv = `email,name\r\n${csvGood[0].email},A\r\nbad-${tag},B\r\nthree,fields,${tag}\r\n${csvGood[1].email},C\r\n`;
  return [
    {
      label: 'JSON',
      contentType: 'application/json',
      body: JSON.stringify(json),
      received: 6,
      good: [good[0].email, good[1].email],
      invalid: 4,
    },
    {
      label: 'NDJSON',
      contentType: NDJSON,
      body: `${ndjson.join('\n')}\n`,
      received: 5,
      good: [good[2].email, good[3].email],
      invalid: 3,
    },
    {
      label: 'CSV',
      contentType: CSV,
      body: csv,
      received: 4,
      good: csvGood.map((u) => u.email),
      invalid: 2,
    },
  ];
}

describe('a request retried with the same Idempotency-Key quarantines nothing twice', () => {
  const ctx = useAppAndDatabase({
    INGEST_TOKENS: JSON.stringify(TOKENS),
    DB_LOCK_TIMEOUT_MS: '3000',
  });
  /** @param {string} body @param {string} contentType @param {Record<string, string>} headers */
  const post = (body, contentType, headers) =>
    ctx.app.postUsers(body, { token: TOKENS.feeder, contentType, headers });
  /** @param {string} requestId */
  const keptBy = async (requestId) =>
    (
      await ctx.db.pool.query(
        'SELECT position, times_seen FROM quarantined_items WHERE request_id = $1 ORDER BY position',
        [requestId],
      )
    ).rows;

  for (const { label, contentType, body, received, good, invalid } of bodies(uniqueTag())) {
    test(`${label}: the retry gets the first answer, replayed; each invalid item kept once, by the first request; the users as the first left them`, async () => {
      const key = `q-${label}-${uniqueTag()}`;
      const first = await post(body, contentType, keyed(key));
      assert.equal(first.status, 201, first.text);
      assert.equal(first.headers.get('idempotent-replayed'), null);
      const { errors, ...counts } = first.body;
      assert.deepEqual(counts, {
        received,
        inserted: received - invalid,
        updated: 0,
        duplicates: 0,
        quarantined: invalid,
      });
      assert.ok(errors.length >= invalid);
      const firstId = /** @type {string} */ (first.headers.get('x-request-id'));
      const kept = await keptBy(firstId);
      assert.equal(kept.length, invalid, 'the first request kept its invalid items');
      assert.ok(kept.every((k) => k.times_seen === 1));
      const before = await tables(ctx.db.pool);

      for (let attempt = 0; attempt < 2; attempt++) {
        const again = await post(body, contentType, keyed(key));
        assert.deepEqual(asSent(again), asSent(first), 'the first answer again');
        assert.equal(again.headers.get('idempotent-replayed'), 'true');
        assert.notEqual(again.headers.get('x-request-id'), firstId, 'a request of its own');
        assert.deepEqual(
          await keptBy(/** @type {string} */ (again.headers.get('x-request-id'))),
          [],
          'the retry kept nothing',
        );
      }
      assert.deepEqual(
        await tables(ctx.db.pool),
        before,
        "neither table touched by the retries: the items still the first request's, seen once",
      );
      assert.equal((await ctx.db.usersByEmail(good)).size, good.length);
      assert.ok(!JSON.stringify(before.kept).includes(PLAINTEXT), 'no plaintext password kept');
    });
  }

  test('the same key sent twice at once: one write, one keeping of the items; the other answer the same or 409', async () => {
    const tag = uniqueTag();
    const users = makeUsers(300, tag);
    const bad = Array.from({ length: 5 }, (_, i) => ({ email: `at-once-${tag}-${i}`, name: 'X' }));
    const body = JSON.stringify([...users.slice(0, 150), ...bad, ...users.slice(150)]);
    const key = `at-once-${tag}`;
    const answers = await Promise.all([
      post(body, 'application/json', keyed(key)),
      post(body, 'application/json', keyed(key)),
    ]);
    const firsts = answers.filter(
      (a) => a.status === 201 && a.headers.get('idempotent-replayed') === null,
    );
    assert.equal(
      firsts.length,
      1,
      answers.map((a) => `${a.status} ${a.text.slice(0, 200)}`).join('\n'),
    );
    const [other] = answers.filter((a) => a !== firsts[0]);
    if (other.status === 409) assert.equal(other.body.error, 'idempotency_key_in_flight');
    else
      assert.deepEqual(
        [asSent(other), other.headers.get('idempotent-replayed')],
        [asSent(firsts[0]), 'true'],
      );
    const { rows } = await ctx.db.pool.query(
      'SELECT request_id, times_seen FROM quarantined_items WHERE item LIKE $1',
      [`%at-once-${tag}-%`],
    );
    assert.deepEqual(
      rows,
      bad.map(() => ({ request_id: firsts[0].headers.get('x-request-id'), times_seen: 1 })),
    );
    assert.equal((await ctx.db.usersByEmail(users.map((u) => u.email))).size, 300);
  });
});
