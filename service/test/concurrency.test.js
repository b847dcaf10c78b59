import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp } from '../../test/support/app.js';
import { createTestDatabase } from '../../test/support/database.js';
import { STRATEGIES } from '../src/users/user-repository.js';
import { makeUsers } from '../../test/support/users.js';

for (const strategy of Object.keys(STRATEGIES)) {

  describe(`concurrent overlapping batches (INSERT_STRATEGY=${strategy})`, () => {
    /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
    /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
    before(async () => {
      db = await createTestDatabase();
      app = await startTestApp({ databaseUrl: db.url, env: { INSERT_STRATEGY: strategy, DB_POOL_MAX: '10', DB_CONNECT_TIMEOUT_MS: '20000', INSERT_CHUNK_ROWS: '250' } });
    });
    after(async () => {
      await app.close();
      await db.drop();
    });

    test('20 requests sharing emails: no error, no duplicate, inserted adds up to the new rows', async () => {
      const pool = makeUsers(3000);
      // Each request takes 1000 users from an overlapping window, shuffled, so lock orders would
      // cross if the service did not sort.
      const batches = Array.from({ length: 20 }, (_, r) => {
        const start = (r * 100) % 2000;
        return pool.slice(start, start + 1000).sort(() => Math.random() - 0.5);
      });
      const before = await db.countUsers();
      const answers = await Promise.all(batches.map((b) => app.postUsers(b)));
      for (const a of answers) assert.ok(a.status === 200 || a.status === 201, `status ${a.status}: ${a.text}`);
      const inserted = answers.reduce((sum, a) => sum + a.body.inserted, 0);
      const after = await db.countUsers();
      assert.equal(after - before, inserted);
      assert.equal(await db.duplicateEmails(), 0);
      const distinct = new Set(batches.flat().map((u) => u.email)).size;
      assert.equal(inserted, distinct);
    });
  });
}
