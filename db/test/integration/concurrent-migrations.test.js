import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { databaseUrlFromEnv } from '../../src/database-url.js';
import { migrate } from '../../src/migrate.js';
import { createTestDatabase } from '../../../test/support/database.js';

describe('migrations from PG* variables, several processes at once', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  before(async () => {
    db = await createTestDatabase({ migrated: false });
  });
  after(() => db?.drop());

  test('four concurrent runs all succeed (they wait for the advisory lock); exactly one applies the migrations, each once', async () => {
    const u = new URL(db.url);
    const url = /** @type {string} */ (
      databaseUrlFromEnv({
        PGHOST: u.hostname,
        PGPORT: u.port,
        PGUSER: decodeURIComponent(u.username),
        PGPASSWORD: decodeURIComponent(u.password) || 'unused',
        PGDATABASE: u.pathname.slice(1),
        PGSSLMODE: 'disable',
      })
    );
    const runs = await Promise.all(Array.from({ length: 4 }, () => migrate(url)));
    const applied = runs.flat();
    assert.ok(applied.length > 0, 'the fresh database had migrations to apply');
    assert.equal(
      runs.filter((r) => r.length > 0).length,
      1,
      'exactly one run applied them; the others found nothing pending',
    );
    assert.deepEqual(
      runs.find((r) => r.length > 0),
      [...applied].sort(),
      'that one applied them all, in order',
    );
    assert.equal(new Set(applied).size, applied.length, 'no migration was applied twice');
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM pgmigrations');
    assert.equal(rows[0].n, applied.length);
    assert.equal(
      (await db.pool.query("SELECT to_regclass('public.users') IS NOT NULL AS ok")).rows[0].ok,
      true,
    );
  });
});
