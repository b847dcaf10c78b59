// Migrations through a transaction pooler (a real PgBouncer in transaction mode): the lock and the
// migrations are one transaction, so they hold whichever server connection the pooler lends; and
// DIRECT_DATABASE_URL, when set, is where `npm run migrate` goes instead of DATABASE_URL.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { migrate } from '../../src/migrate.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { startPgBouncer } from '../../../test/support/pgbouncer.js';

const CLI = fileURLToPath(new URL('../../src/migrate-cli.js', import.meta.url));
const execFileAsync = promisify(execFile);

describe('migrations through PgBouncer in transaction mode', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startPgBouncer>>} */ let pooler;
  before(async () => {
    db = await createTestDatabase({ migrated: false });
    // Two server connections for four runs: each run's transaction holds one while it waits.
    pooler = await startPgBouncer({ upstreamUrl: db.url, poolSize: 2 });
  });
  after(async () => {
    await pooler?.stop();
    await db?.drop();
  });

  test('four concurrent runs through the pooler all succeed and apply each migration once; no lock is left behind', async () => {
    const runs = await Promise.all(Array.from({ length: 4 }, () => migrate(pooler.url)));
    const applied = runs.flat();
    assert.ok(applied.length > 0, 'the fresh database had migrations to apply');
    assert.equal(new Set(applied).size, applied.length, 'no migration was applied twice');
    assert.equal(
      runs.filter((r) => r.length > 0).length,
      1,
      'one run applied them all, the others found them applied',
    );
    const { rows } = await db.pool.query(`SELECT
      (SELECT count(*)::int FROM pgmigrations) AS migrations,
      (SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory') AS advisory_locks,
      to_regclass('public.users') IS NOT NULL AS users`);
    assert.deepEqual(rows[0], { migrations: applied.length, advisory_locks: 0, users: true });
    assert.deepEqual(await migrate(pooler.url), [], 'a run after them has nothing to do');
  });

  test('npm run migrate goes to DIRECT_DATABASE_URL when it is set, whatever DATABASE_URL says', async () => {
    const fresh = await createTestDatabase({ migrated: false });
    try {
      const env = {
        ...process.env,
        DATABASE_URL: 'postgres://nobody:secret@127.0.0.1:1/unreachable',
        DIRECT_DATABASE_URL: fresh.url,
      };
      const { stdout } = await execFileAsync(process.execPath, [CLI], { env, timeout: 30_000 });
      assert.match(stdout, /^applied: 0001_create_users, /);
      assert.equal(
        (await fresh.pool.query("SELECT to_regclass('public.users') IS NOT NULL AS ok")).rows[0].ok,
        true,
      );
      const bad = await execFileAsync(process.execPath, [CLI], {
        env: { ...env, DIRECT_DATABASE_URL: 'mysql://x' },
        timeout: 30_000,
      }).then(
        () => undefined,
        (err) => err,
      );
      assert.equal(bad?.code, 2);
      assert.match(bad.stderr, /DIRECT_DATABASE_URL/);
    } finally {
      await fresh.drop();
    }
  });
});
