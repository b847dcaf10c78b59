import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { WRITE_VARIANTS } from '../../../test/support/write-variants.js';
import { makeUsers } from '../../../test/support/users.js';

for (const { label, env } of WRITE_VARIANTS) {
  describe(`concurrent overlapping batches (${label})`, () => {
    const ctx = useAppAndDatabase({
      ...env,
      DB_POOL_MAX: '10',
      DB_CONNECT_TIMEOUT_MS: '20000',
      INSERT_CHUNK_ROWS: '250',
    });

    test('20 requests sharing emails: no error, no deadlock, and inserted adds up to the new rows', async () => {
      const pool = makeUsers(3000);
      // Each request takes 1000 users from an overlapping window, shuffled, so lock orders would
      // cross if the service did not sort.
      const batches = Array.from({ length: 20 }, (_, r) => {
        const start = (r * 100) % 2000;
        return pool.slice(start, start + 1000).sort(() => Math.random() - 0.5);
      });
      const before = await ctx.db.countUsers();
      const answers = await Promise.all(batches.map((b) => ctx.app.postUsers(b)));
      for (const a of answers)
        assert.ok(a.status === 200 || a.status === 201, `status ${a.status}: ${a.text}`);
      const inserted = answers.reduce((sum, a) => sum + a.body.inserted, 0);
      const after = await ctx.db.countUsers();
      assert.equal(after - before, inserted);
      const distinct = new Set(batches.flat().map((u) => u.email)).size;
      assert.equal(inserted, distinct);
    });
  });
}
