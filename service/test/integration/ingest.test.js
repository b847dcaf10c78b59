import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { WRITE_VARIANTS } from '../../../test/support/write-variants.js';
import { makeUsers, SAMPLE_HASH } from '../../../test/support/users.js';

for (const { label, env } of WRITE_VARIANTS) {
  describe(`POST /users writes each user exactly once (${label})`, () => {
    const ctx = useAppAndDatabase({ ...env });

    for (const count of [1, 1000, 10_000]) {
      test(`${count} users land once and the counts match the table`, async () => {
        const before = await ctx.db.countUsers();
        const users = makeUsers(count);
        const res = await ctx.app.postUsers(users);
        assert.equal(res.status, 201);
        assert.deepEqual(res.body, { received: count, inserted: count, updated: 0, duplicates: 0 });
        assert.equal(await ctx.db.countUsers(), before + count);
        const stored = await ctx.db.usersByEmail([users[0].email, users[count - 1].email]);
        assert.deepEqual(stored.get(users[count - 1].email), {
          email: users[count - 1].email,
          name: users[count - 1].name,
          phone: users[count - 1].phone,
          password_hash: SAMPLE_HASH,
        });
      });
    }

    test('a replayed batch inserts nothing and answers 200 with every user a duplicate', async () => {
      const users = makeUsers(1500); // two chunks: the transaction path
      assert.equal((await ctx.app.postUsers(users)).status, 201);
      const before = await ctx.db.countUsers();
      const res = await ctx.app.postUsers(users);
      assert.equal(res.status, 200);
      assert.deepEqual(res.body, { received: 1500, inserted: 0, updated: 0, duplicates: 1500 });
      assert.equal(await ctx.db.countUsers(), before);
    });

    test('a partly known batch inserts only the new users', async () => {
      const users = makeUsers(10);
      await ctx.app.postUsers(users.slice(0, 4));
      const res = await ctx.app.postUsers(users);
      assert.equal(res.status, 201);
      assert.deepEqual(res.body, { received: 10, inserted: 6, updated: 0, duplicates: 4 });
    });

    test('the same email twice in a batch, or in another case, is one user stored lower-cased', async () => {
      const [u] = makeUsers(1);
      const shouting = { ...u, email: u.email.toUpperCase(), name: 'Second' };
      const before = await ctx.db.countUsers();
      const res = await ctx.app.postUsers([u, { ...u }, shouting]);
      assert.equal(res.status, 201);
      assert.deepEqual(res.body, { received: 3, inserted: 1, updated: 0, duplicates: 2 });
      assert.equal(await ctx.db.countUsers(), before + 1);
      const stored = await ctx.db.usersByEmail([u.email.toLowerCase()]);
      assert.equal(stored.get(u.email.toLowerCase())?.name, u.name, 'the first occurrence wins');

      const replay = await ctx.app.postUsers([shouting]);
      assert.deepEqual(replay.body, { received: 1, inserted: 0, updated: 0, duplicates: 1 });
    });

    test('optional fields may be left out and are stored as NULL', async () => {
      const email = `minimal-${Date.now()}@example.org`;
      const res = await ctx.app.postUsers([{ email, name: 'Min' }]);
      assert.equal(res.status, 201);
      const row = (await ctx.db.usersByEmail([email])).get(email);
      assert.deepEqual(row, { email, name: 'Min', phone: null, password_hash: null });
    });

    test('refusals are logged with their request id, successes are not at info; no user data, no token', async () => {
      const users = makeUsers(3);
      const from = ctx.app.logs.length;
      const ok = await ctx.app.postUsers(users, {
        headers: { authorization: 'Bearer not-a-real-secret-token', 'x-request-id': 'ok-1' },
      });
      const bad = await ctx.app.postUsers([{ ...users[0], email: 'not an email' }], {
        headers: { 'x-request-id': 'bad-1' },
      });
      assert.deepEqual([ok.status, bad.status], [201, 400]);
      const lines = ctx.app.logs.slice(from);
      assert.ok(
        !lines.some((l) => l.reqId === 'ok-1'),
        'a success costs no log line at info (metrics count it)',
      );
      const refused = lines.find((l) => l.reqId === 'bad-1');
      assert.equal(refused?.msg, 'request completed');
      assert.deepEqual(
        [refused?.level, refused?.req?.url, refused?.res?.statusCode],
        [40, '/users', 400],
      );
      const text = JSON.stringify(lines);
      assert.ok(!text.includes(users[0].email), 'no email in the log');
      assert.ok(!text.includes('not-a-real-secret-token'), 'no token in the log');
    });
  });
}
