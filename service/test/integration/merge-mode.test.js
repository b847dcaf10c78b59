import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { postHead, rawExchange } from '../../../test/support/raw-http.js';
import { SAMPLE_HASH, makeUsers, uniqueTag } from '../../../test/support/users.js';
import { WRITE_VARIANTS } from '../../../test/support/write-variants.js';

const MERGE = { prefer: 'resolution=merge-duplicates' };
const IGNORE = { prefer: 'resolution=ignore-duplicates' };
const OTHER_HASH = '$2b$12$R9h/cIPz0gi.URNNX3kh2OPST9/PgBkqquzi.Ss7KIUgO2t0jWMUW';

// Merge mode: `Prefer: resolution=merge-duplicates` updates stored users, with exact counts, and
// writes nothing for a row that would not change; under every strategy, with group commit on and off.
for (const { label, env } of WRITE_VARIANTS) {
  describe(`merge mode (${label})`, () => {
    // Chunks of 3 rows: a request of a few users is several statements in one transaction.
    const ctx = useAppAndDatabase({ ...env, INSERT_CHUNK_ROWS: '3' });
    /** @param {unknown} body @param {Record<string, string>} [headers] */
    const post = (body, headers = {}) => ctx.app.postUsers(body, { headers });
    /** What the service logged for a failed answer, so that a failure names its cause. @param {string | undefined} errorId */
    const loggedCause = (errorId) =>
      JSON.stringify(
        ctx.app.logs
          .filter((l) => errorId && l.errorId === errorId)
          .map((l) => `${l.err?.code ?? ''} ${l.err?.message ?? ''}`),
      );
    /** @param {string[]} emails */
    const rows = async (emails) =>
      new Map(
        (
          await ctx.db.pool.query(
            'SELECT email, name, phone, password_hash, created_at, updated_at, xmin::text AS version FROM users WHERE email = ANY($1)',
            [emails],
          )
        ).rows.map((r) => [r.email, r]),
      );

    test('new emails are inserted, stored ones take the sent name and the sent phone and hash where given; counts and Preference-Applied', async () => {
      const [a, b, c] = makeUsers(3);
      assert.equal((await post([a, b])).status, 201);
      const before = await rows([a.email, b.email]);
      const res = await post(
        [
          { email: a.email.toUpperCase(), name: 'A renamed' },
          { ...b, name: 'B renamed', phone: '+4400000000', passwordHash: OTHER_HASH },
          c,
        ],
        MERGE,
      );
      assert.equal(res.status, 201, res.text);
      assert.deepEqual(res.body, { received: 3, inserted: 1, updated: 2, stale: 0, duplicates: 2 });
      assert.equal(res.headers.get('preference-applied'), 'resolution=merge-duplicates');
      const after = await rows([a.email, b.email, c.email]);
      assert.deepEqual(
        [after.get(a.email)?.name, after.get(a.email)?.phone, after.get(a.email)?.password_hash],
        ['A renamed', a.phone, SAMPLE_HASH],
        'omitted fields keep their stored values',
      );
      assert.deepEqual(
        [after.get(b.email)?.name, after.get(b.email)?.phone, after.get(b.email)?.password_hash],
        ['B renamed', '+4400000000', OTHER_HASH],
      );
      for (const u of [a, b]) {
        assert.ok(after.get(u.email)?.updated_at instanceof Date, 'updated_at records the merge');
        assert.deepEqual(
          after.get(u.email)?.created_at,
          before.get(u.email)?.created_at,
          'created_at never changes',
        );
      }
      assert.equal(after.get(c.email)?.updated_at, null, 'an insert is no update');
    });

    test('a replay of unchanged users writes no row version, and answers 200 with nothing updated', async () => {
      const users = makeUsers(5);
      assert.equal((await post(users)).status, 201);
      const before = await rows(users.map((u) => u.email));
      const res = await post(users, MERGE);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body, { received: 5, inserted: 0, updated: 0, stale: 5, duplicates: 5 });
      const after = await rows(users.map((u) => u.email));
      for (const u of users) {
        assert.equal(
          after.get(u.email)?.version,
          before.get(u.email)?.version,
          'the same row version (xmin): not written',
        );
        assert.equal(after.get(u.email)?.updated_at, null);
      }
    });

    test('the same email twice in one request: merge applies them in order, ignore keeps the first', async () => {
      const tag = uniqueTag();
      const email = `twice-${tag}@example.com`;
      const merged = await post(
        [
          { email, name: 'First', phone: '+4411111111' },
          { email: email.toUpperCase(), name: 'Second' },
        ],
        MERGE,
      );
      assert.equal(merged.status, 201, merged.text);
      assert.deepEqual(merged.body, {
        received: 2,
        inserted: 1,
        updated: 0,
        stale: 1,
        duplicates: 1,
      });
      assert.deepEqual(
        [(await rows([email])).get(email)?.name, (await rows([email])).get(email)?.phone],
        ['Second', '+4411111111'],
      );
      const again = await post(
        [
          { email, name: 'Third' },
          { email, name: 'Fourth' },
        ],
        MERGE,
      );
      assert.deepEqual(again.body, {
        received: 2,
        inserted: 0,
        updated: 1,
        stale: 1,
        duplicates: 2,
      });
      assert.equal((await rows([email])).get(email)?.name, 'Fourth');

      const other = `first-${tag}@example.com`;
      await post(
        [
          { email: other, name: 'Kept' },
          { email: other, name: 'Dropped' },
        ],
        IGNORE,
      );
      assert.equal((await rows([other])).get(other)?.name, 'Kept');
    });

    test('ignore mode (asked or not) never changes a stored user', async () => {
      const [u] = makeUsers(1);
      await post([u]);
      for (const headers of [{}, IGNORE]) {
        const res = await post([{ ...u, name: 'Changed?' }], headers);
        assert.deepEqual(res.body, { received: 1, inserted: 0, updated: 0, duplicates: 1 });
        assert.equal(
          res.headers.get('preference-applied'),
          headers === IGNORE ? 'resolution=ignore-duplicates' : null,
        );
      }
      assert.equal((await rows([u.email])).get(u.email)?.name, u.name);
    });

    test('all or nothing: one invalid user, or an unsupported resolution, and nothing is merged', async () => {
      const [u] = makeUsers(1);
      await post([u]);
      const invalid = await post(
        [
          { ...u, name: 'Should not land' },
          { email: 'not-an-email', name: 'X' },
        ],
        MERGE,
      );
      assert.equal(invalid.status, 400);
      const unsupported = await post([{ ...u, name: 'Should not land' }], {
        prefer: 'resolution=overwrite',
      });
      assert.equal(unsupported.status, 400);
      assert.equal(unsupported.body.error, 'unsupported_preference');
      assert.equal((await rows([u.email])).get(u.email)?.name, u.name);
    });

    test('two resolutions that differ, in one Prefer header or in two: 400, and nothing is written', async () => {
      const [u] = makeUsers(1);
      await post([u]);
      const oneHeader = await post([{ ...u, name: 'Should not land' }], {
        prefer: 'resolution=merge-duplicates, resolution=ignore-duplicates',
      });
      assert.deepEqual([oneHeader.status, oneHeader.body.error], [400, 'unsupported_preference']);
      const body = JSON.stringify([{ ...u, name: 'Should not land either' }]);
      const twoHeaders = await rawExchange(ctx.app.baseUrl, (s) => {
        s.end(
          postHead([
            ['Content-Type', 'application/json'],
            ['Prefer', 'resolution=merge-duplicates'],
            ['Prefer', 'resolution=ignore-duplicates'],
            ['Connection', 'close'],
            ['Content-Length', Buffer.byteLength(body)],
          ]) + body,
        );
      });
      assert.deepEqual(
        [twoHeaders.status, twoHeaders.body?.error],
        [400, 'unsupported_preference'],
      );
      assert.equal((await rows([u.email])).get(u.email)?.name, u.name);
    });

    test('concurrent merges over overlapping emails never fail or deadlock, and leave each user as one of the requests sent it', async () => {
      const pool = makeUsers(60);
      await post(pool.slice(0, 30));
      const requests = Array.from({ length: 16 }, (_, r) => {
        // Each request: 20 users of the pool, in its own order, with its own name for them.
        const picked = [...pool].sort(() => Math.random() - 0.5).slice(0, 20);
        return picked.map((u) => ({ ...u, name: `request ${r}` }));
      });
      const answers = await Promise.all(requests.map((body) => post(body, MERGE)));
      for (const a of answers)
        assert.ok(
          a.status === 200 || a.status === 201,
          `${a.text}: ${loggedCause(a.body?.errorId)}`,
        );
      const stored = await rows(pool.map((u) => u.email));
      const sentTo = new Map(
        pool.map((u) => [
          u.email,
          new Set(
            requests.flatMap((body, r) =>
              body.some((x) => x.email === u.email) ? [`request ${r}`] : [],
            ),
          ),
        ]),
      );
      for (const u of pool) {
        const names = /** @type {Set<string>} */ (sentTo.get(u.email));
        if (names.size === 0) continue;
        assert.ok(
          names.has(stored.get(u.email)?.name),
          `${u.email} holds a name one of its requests sent`,
        );
      }
      const inserted = answers.reduce((n, a) => n + a.body.inserted, 0);
      const sentNew = new Set(
        requests
          .flat()
          .map((u) => u.email)
          .filter((e) => pool.findIndex((p) => p.email === e) >= 30),
      );
      assert.equal(
        inserted,
        sentNew.size,
        'each new email inserted exactly once across all requests',
      );
    });
  });
}
