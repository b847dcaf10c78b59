// Merges that never go back in time. An item may carry `changedAt`; in merge mode a
// stored row is replaced only by a strictly newer change, and every item that wrote nothing is
// counted in `stale` (inserted + updated + stale = received). Against the real PostgreSQL, under
// every strategy, with group commit on and off; streams (NDJSON, CSV) at the end.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { uniqueTag } from '../../../test/support/users.js';
import { WRITE_VARIANTS } from '../../../test/support/write-variants.js';

const MERGE = { prefer: 'resolution=merge-duplicates' };
const T1 = '2026-11-26T10:00:00.000001Z';
const T2 = '2026-11-26T10:00:00.000002Z';
const T3 = '2026-11-26T11:00:00+00:00';
// T3 written with another offset: the same instant.
const T3_ELSEWHERE = '2026-11-26T12:00:00.000000+01:00';

/** A changedAt `k` microseconds after a base, in UTC with 6 digits (as the table answers it below). @param {number} k */
const at = (k) =>
  new Date(Date.parse('2026-01-01T00:00:00Z') + Math.floor(k / 1000))
    .toISOString()
    .replace('Z', `${String(k % 1000).padStart(3, '0')}Z`);

/** @template T @param {T[]} items @returns {T[]} */
function shuffled(items) {
  const out = items.slice();
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/**
 * Runs every task, `concurrency` at a time.
 * @template T @param {(() => Promise<T>)[]} tasks @param {number} concurrency @returns {Promise<T[]>}
 */
async function inParallel(tasks, concurrency) {
  /** @type {T[]} */ const results = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < tasks.length) {
        const i = next++;
        results[i] = await tasks[i]();
      }
    }),
  );
  return results;
}

/** @param {{ received: number, inserted: number, updated: number, stale: number, duplicates: number }} b */
const addsUp = (b) =>
  b.inserted + b.updated + b.stale === b.received && b.duplicates === b.received - b.inserted;

for (const { label, env } of WRITE_VARIANTS) {
  describe(`changedAt in merge mode (${label})`, () => {
    // Chunks of 3 rows: a request of a few users is several statements in one transaction.
    const ctx = useAppAndDatabase({ ...env, INSERT_CHUNK_ROWS: '3' });
    /** @param {unknown} body @param {Record<string, string>} [headers] */
    const post = (body, headers = MERGE) => ctx.app.postUsers(body, { headers });
    /** @param {string[]} emails */
    const rows = async (emails) =>
      new Map(
        (
          await ctx.db.pool.query(
            `SELECT email, name, phone, to_char(changed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS changed_at, updated_at, xmin::text AS version
             FROM users WHERE email = ANY($1)`,
            [emails],
          )
        ).rows.map((r) => [r.email, r]),
      );
    const email = () => `ca-${uniqueTag()}@example.com`;

    test('a stored row takes only a strictly newer change; an older or equal one writes nothing and is stale', async () => {
      const e = email();
      assert.equal((await post([{ email: e, name: 'v2', changedAt: T2 }])).status, 201);
      const before = (await rows([e])).get(e);
      assert.equal(before.changed_at, T2, 'stored with the row');
      for (const changedAt of [T1, T2]) {
        const res = await post([
          { email: e, name: `late ${changedAt}`, phone: '+4400000001', changedAt },
        ]);
        assert.equal(res.status, 200, res.text);
        assert.deepEqual(res.body, {
          received: 1,
          inserted: 0,
          updated: 0,
          stale: 1,
          duplicates: 1,
        });
      }
      assert.equal(
        (await rows([e])).get(e).version,
        before.version,
        'not written: the same row version',
      );
      const newer = await post([{ email: e, name: 'v3', changedAt: T3 }]);
      assert.deepEqual(newer.body, {
        received: 1,
        inserted: 0,
        updated: 1,
        stale: 0,
        duplicates: 1,
      });
      const after = (await rows([e])).get(e);
      assert.deepEqual([after.name, after.changed_at], ['v3', '2026-11-26T11:00:00.000000Z']);
      const sameInstant = await post([
        { email: e, name: 'v3 again, other offset', changedAt: T3_ELSEWHERE },
      ]);
      assert.deepEqual(
        sameInstant.body,
        { received: 1, inserted: 0, updated: 0, stale: 1, duplicates: 1 },
        'the same instant in another offset is equal: stale',
      );
    });

    test('NULLs: a change with changedAt beats a row without; a change without one never replaces a row with one', async () => {
      const [plain, versioned] = [email(), email()];
      await post([
        { email: plain, name: 'no version' },
        { email: versioned, name: 'versioned', changedAt: T1 },
      ]);
      const res = await post([
        { email: plain, name: 'now versioned', changedAt: T1 },
        { email: versioned, name: 'unversioned change' },
      ]);
      assert.deepEqual(res.body, { received: 2, inserted: 0, updated: 1, stale: 1, duplicates: 2 });
      const stored = await rows([plain, versioned]);
      assert.deepEqual(
        [stored.get(plain).name, stored.get(plain).changed_at],
        ['now versioned', T1],
      );
      assert.deepEqual(
        [stored.get(versioned).name, stored.get(versioned).changed_at],
        ['versioned', T1],
        'never back in time',
      );
      // Neither has one: merge as before changedAt existed.
      const e = email();
      await post([{ email: e, name: 'A' }]);
      assert.deepEqual((await post([{ email: e, name: 'B' }])).body, {
        received: 1,
        inserted: 0,
        updated: 1,
        stale: 0,
        duplicates: 1,
      });
      assert.deepEqual(
        (await post([{ email: e, name: 'B' }])).body,
        { received: 1, inserted: 0, updated: 0, stale: 1, duplicates: 1 },
        'unchanged: nothing written, stale',
      );
    });

    test('a newer change with the same values still moves changedAt, so an older one cannot come in between', async () => {
      const e = email();
      await post([{ email: e, name: 'A', changedAt: T1 }]);
      assert.deepEqual((await post([{ email: e, name: 'A', changedAt: T3 }])).body, {
        received: 1,
        inserted: 0,
        updated: 1,
        stale: 0,
        duplicates: 1,
      });
      assert.deepEqual((await post([{ email: e, name: 'B', changedAt: T2 }])).body, {
        received: 1,
        inserted: 0,
        updated: 0,
        stale: 1,
        duplicates: 1,
      });
      assert.equal((await rows([e])).get(e).name, 'A');
    });

    test('within one request the newest change of an email wins whatever its line; a tie goes to the later line', async () => {
      const [a, b, c] = [email(), email(), email()];
      const res = await post([
        { email: a, name: 'a3', changedAt: T3 },
        { email: b, name: 'b1', changedAt: T2 },
        { email: a.toUpperCase(), name: 'a1', phone: '+4411111111', changedAt: T1 },
        { email: b, name: 'b2', changedAt: T2 },
        { email: a, name: 'a2', changedAt: T2 },
        { email: c, name: 'c unversioned, after' },
        { email: c, name: 'c versioned', changedAt: T1 },
        { email: c, name: 'c unversioned, last' },
      ]);
      assert.equal(res.status, 201, res.text);
      assert.deepEqual(res.body, { received: 8, inserted: 3, updated: 0, stale: 5, duplicates: 5 });
      const stored = await rows([a, b, c]);
      assert.deepEqual(
        [stored.get(a).name, stored.get(a).phone, stored.get(a).changed_at],
        ['a3', '+4411111111', '2026-11-26T11:00:00.000000Z'],
        "the newest's name; an older change's phone where the newest has none",
      );
      assert.equal(stored.get(b).name, 'b2');
      assert.deepEqual(
        [stored.get(c).name, stored.get(c).changed_at],
        ['c versioned', T1],
        'a change without changedAt is older than one with it',
      );
    });

    test('ignore mode: stored on insert, a stored row never touched whatever its changedAt', async () => {
      const e = email();
      assert.deepEqual((await post([{ email: e, name: 'first', changedAt: T1 }], {})).body, {
        received: 1,
        inserted: 1,
        updated: 0,
        duplicates: 0,
      });
      assert.deepEqual((await post([{ email: e, name: 'newer', changedAt: T3 }], {})).body, {
        received: 1,
        inserted: 0,
        updated: 0,
        duplicates: 1,
      });
      const stored = (await rows([e])).get(e);
      assert.deepEqual([stored.name, stored.changed_at], ['first', T1]);
    });

    test('return=representation: a stale item is not among the rows written; with outcome it is skipped', async () => {
      const [old, fresh] = [email(), email()];
      await post([
        { email: old, name: 'stored', changedAt: T2 },
        { email: fresh, name: 'stored', changedAt: T1 },
      ]);
      const res = await post(
        [
          { email: old, name: 'older', changedAt: T1 },
          { email: fresh, name: 'newer', changedAt: T2 },
        ],
        { prefer: 'resolution=merge-duplicates, return=representation' },
      );
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(
        res.body.map((/** @type {{ email: string, name: string }} */ u) => [u.email, u.name]),
        [[fresh, 'newer']],
      );
      const outcomes = await fetchOutcomes([
        { email: old, name: 'older', changedAt: T1 },
        { email: fresh, name: 'newest', changedAt: T3 },
      ]);
      assert.deepEqual(outcomes, [
        [old, 'skipped'],
        [fresh, 'updated'],
      ]);
    });

    /** @param {object[]} users */
    async function fetchOutcomes(users) {
      const res = await fetch(`${ctx.app.baseUrl}/users?select=email,outcome`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          prefer: 'resolution=merge-duplicates, return=representation',
        },
        body: JSON.stringify(users),
      });
      return /** @type {{ email: string, outcome: string }[]} */ (await res.json()).map((u) => [
        u.email,
        u.outcome,
      ]);
    }

    // Three changes of each of 1,000 users posted out of order, concurrently,
    // through separate requests and inside one batch: every stored row is the newest change, and
    // the answers' counts add up.
    test('three changes of 1,000 users, shuffled, through concurrent requests and in one batch: every row is its newest change; the counts add up', async () => {
      const tag = uniqueTag();
      const changes = [];
      for (let i = 0; i < 1000; i++) {
        for (let v = 1; v <= 3; v++) {
          changes.push({
            email: `order-${tag}-${i}@example.com`,
            name: `user ${i} v${v}`,
            phone: `+1555${String(i * 10 + v).padStart(7, '0')}`,
            changedAt: at(i * 10 + v),
          });
        }
      }
      /** @param {object[]} users */
      const check = async (users) => {
        const stored = await rows(users.map((u) => /** @type {{ email: string }} */ (u).email));
        assert.equal(stored.size, 1000);
        for (let i = 0; i < 1000; i++) {
          const r = stored.get(`order-${tag}-${i}@example.com`);
          assert.deepEqual([r?.name, r?.changed_at], [`user ${i} v3`, at(i * 10 + 3)]);
        }
      };
      // Separate requests of 10 changes, 16 at once.
      const order = shuffled(changes);
      const requests = [];
      for (let i = 0; i < order.length; i += 10) requests.push(order.slice(i, i + 10));
      const answers = await inParallel(
        requests.map((body) => () => post(body)),
        16,
      );
      const total = { received: 0, inserted: 0, updated: 0, stale: 0, duplicates: 0 };
      for (const res of answers) {
        assert.ok(res.status === 200 || res.status === 201, res.text);
        assert.ok(addsUp(res.body), JSON.stringify(res.body));
        for (const k of /** @type {(keyof typeof total)[]} */ (Object.keys(total)))
          total[k] += res.body[k];
      }
      assert.equal(total.received, 3000);
      assert.equal(total.inserted, 1000);
      await check(changes);

      // Inside one batch, over rows that hold a mix of versions: the batch's newest wins against them.
      const tag2 = uniqueTag();
      const again = changes.map((u) => ({ ...u, email: u.email.replace(tag, tag2) }));
      const seeded = await post(shuffled(again).slice(0, 1500));
      assert.ok(addsUp(seeded.body), JSON.stringify(seeded.body));
      const batch = await post(shuffled(again));
      assert.ok(batch.status === 200 || batch.status === 201, batch.text);
      assert.ok(addsUp(batch.body), JSON.stringify(batch.body));
      assert.equal(batch.body.received, 3000);
      const stored = await rows(again.map((u) => u.email));
      for (let i = 0; i < 1000; i++)
        assert.equal(stored.get(`order-${tag2}-${i}@example.com`)?.name, `user ${i} v3`);

      // Both at once: the whole batch while the same changes go as separate requests. A request
      // locked out for too long is answered 503 with Retry-After, and sent again, as a client does.
      const tag3 = uniqueTag();
      const third = changes.map((u) => ({ ...u, email: u.email.replace(tag, tag3) }));
      const pieces = [];
      const mixed = shuffled(third);
      for (let i = 0; i < mixed.length; i += 10) pieces.push(mixed.slice(i, i + 10));
      /** @param {object[]} body */
      const untilAnswered = async (body) => {
        for (let attempt = 1; ; attempt++) {
          const res = await post(body);
          if (res.status !== 503 || attempt === 10) return res;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      };
      const [whole, ...parts] = await Promise.all([
        untilAnswered(shuffled(third)),
        ...pieces.map((body) => untilAnswered(body)),
      ]);
      for (const res of [whole, ...parts]) {
        assert.ok(res.status === 200 || res.status === 201, res.text);
        assert.ok(addsUp(res.body), JSON.stringify(res.body));
      }
      const inserted = [whole, ...parts].reduce((n, res) => n + res.body.inserted, 0);
      assert.equal(inserted, 1000, 'each user inserted once, by whichever came first');
      const mixedStored = await rows(third.map((u) => u.email));
      for (let i = 0; i < 1000; i++)
        assert.equal(mixedStored.get(`order-${tag3}-${i}@example.com`)?.name, `user ${i} v3`);
    });
  });
}

describe('changedAt in streamed bodies (NDJSON, CSV)', () => {
  const ctx = useAppAndDatabase();
  const NDJSON = 'application/x-ndjson';

  test("merge mode folds an email's lines by newest change, then applies it only if newer than the row stored; CSV takes a changedAt column", async () => {
    const tag = uniqueTag();
    const [a, b, c] = ['a', 'b', 'c'].map((x) => `stream-${tag}-${x}@example.com`);
    await ctx.app.postUsers([{ email: b, name: 'b stored', changedAt: T3 }], { headers: MERGE });
    const lines = [
      { email: a, name: 'a3', changedAt: T3 },
      { email: a, name: 'a1', phone: '+4411111111', changedAt: T1 },
      { email: a, name: 'a2', changedAt: T2 },
      { email: b, name: 'b older', changedAt: T2 },
    ];
    const res = await ctx.app.postUsers(lines.map((u) => JSON.stringify(u)).join('\n'), {
      contentType: NDJSON,
      headers: MERGE,
    });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(res.body, { received: 4, inserted: 1, updated: 0, stale: 3, duplicates: 3 });
    const csv = `email,name,changedAt\r\n${c},c1,${T1}\r\n${c},c3,${T3_ELSEWHERE}\r\n${c},c2,${T2}\r\n${b},b newest,2026-11-26T12:00:00.5-01:00\r\n`;
    const fromCsv = await ctx.app.postUsers(csv, { contentType: 'text/csv', headers: MERGE });
    assert.equal(fromCsv.status, 201, fromCsv.text);
    assert.deepEqual(fromCsv.body, {
      received: 4,
      inserted: 1,
      updated: 1,
      stale: 2,
      duplicates: 3,
    });
    const { rows } = await ctx.db.pool.query(
      'SELECT email, name, phone, changed_at FROM users WHERE email = ANY($1) ORDER BY email',
      [[a, b, c]],
    );
    assert.deepEqual(
      rows.map((r) => [r.email, r.name, r.phone]),
      [
        [a, 'a3', '+4411111111'],
        [b, 'b newest', null],
        [c, 'c3', null],
      ],
    );
    assert.equal(rows[1].changed_at.toISOString(), '2026-11-26T13:00:00.500Z');

    const bad = await ctx.app.postUsers(
      `email,name,changedAt\r\nx-${tag}@example.com,X,2026-02-30T00:00:00Z\r\n`,
      { contentType: 'text/csv', headers: MERGE },
    );
    assert.equal(bad.status, 400);
    assert.deepEqual(bad.body.errors, [
      {
        index: 0,
        line: 2,
        field: 'changedAt',
        message:
          'must be a date and time that exist (month 01-12, a day the month has, hour 00-23, minute and second 00-59) with an offset PostgreSQL takes (at most ±15:59; real ones are within -12:00 and +14:00)',
      },
    ]);
  });

  test('a changedAt that cannot be stored as sent is refused with 400 naming the field', async () => {
    const tag = uniqueTag();
    const res = await ctx.app.postUsers(
      [
        { email: `v1-${tag}@example.com`, name: 'A', changedAt: '2026-11-26T10:00:00.1234567Z' },
        { email: `v2-${tag}@example.com`, name: 'B', changedAt: '2026-11-26T10:00:00' },
        { email: `v3-${tag}@example.com`, name: 'C', changedAt: '2025-02-29T10:00:00Z' },
        { email: `v4-${tag}@example.com`, name: 'D', changedAt: 1764150000 },
        {
          email: `v5-${tag}@example.com`,
          name: 'E',
          changedAt: '2024-02-29T23:59:59.999999-15:59',
        },
        {
          email: `v6-${tag}@example.com`,
          name: 'F',
          changedAt: '2024-02-29T23:59:59.999999-16:00',
        },
      ],
      { headers: MERGE },
    );
    assert.equal(res.status, 400);
    assert.deepEqual(
      res.body.errors.map((/** @type {{ index: number, field: string, message: string }} */ e) => [
        e.index,
        e.field,
        e.message.slice(0, 40),
      ]),
      [
        [0, 'changedAt', 'has more than 6 fractional digits: Postg'],
        [1, 'changedAt', 'must be an RFC 3339 date-time with an of'],
        [2, 'changedAt', 'must be a date and time that exist (mont'],
        [3, 'changedAt', 'must be a string'],
        [5, 'changedAt', 'must be a date and time that exist (mont'],
      ],
    );
    const { rows } = await ctx.db.pool.query(
      'SELECT count(*)::int AS n FROM users WHERE email LIKE $1',
      [`%-${tag}@example.com`],
    );
    assert.equal(rows[0].n, 0, 'nothing written');
  });
});
