import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DatabaseUrlError, databaseUrlFromEnv } from '../src/database-url.js';
import { migrate } from '../src/migrate.js';
import { createTestDatabase } from '../../test/support/database.js';

describe('databaseUrlFromEnv (unit)', () => {
  test('DATABASE_URL wins when set', () => {
    assert.equal(databaseUrlFromEnv({ DATABASE_URL: 'postgres://a@b/c', PGHOST: 'ignored' }), 'postgres://a@b/c');
  });

  test('neither DATABASE_URL nor PGHOST: undefined, so the caller says what is missing', () => {
    assert.equal(databaseUrlFromEnv({}), undefined);
  });

  test('PG* variables, as ECS injects them, become a URL with the password percent-encoded', () => {
    const url = databaseUrlFromEnv({
      PGHOST: 'db.example.internal', PGPORT: '6432', PGUSER: 'sluice', PGPASSWORD: 'p@ss:w/rd%?#', PGDATABASE: 'users', PGSSLMODE: 'verify-full',
    });
    assert.equal(url, 'postgresql://sluice:p%40ss%3Aw%2Frd%25%3F%23@db.example.internal:6432/users?sslmode=verify-full');
    const parsed = new URL(/** @type {string} */ (url));
    assert.equal(decodeURIComponent(parsed.password), 'p@ss:w/rd%?#');
  });

  test('port defaults to 5432, the database to the user, and no sslmode is added unless asked', () => {
    assert.equal(databaseUrlFromEnv({ PGHOST: 'h', PGUSER: 'u', PGPASSWORD: 'p' }), 'postgresql://u:p@h:5432/u');
  });

  for (const [variable, env] of /** @type {[string, NodeJS.ProcessEnv][]} */ ([
    ['PGUSER', { PGHOST: 'h', PGPASSWORD: 'p' }],
    ['PGPASSWORD', { PGHOST: 'h', PGUSER: 'u' }],
    ['PGPORT', { PGHOST: 'h', PGUSER: 'u', PGPASSWORD: 'p', PGPORT: 'x' }],
    ['PGSSLMODE', { PGHOST: 'h', PGUSER: 'u', PGPASSWORD: 'p', PGSSLMODE: 'sometimes' }],
  ])) {
    test(`a missing or bad ${variable} is refused with its name`, () => {
      assert.throws(() => databaseUrlFromEnv(env), (err) => err instanceof DatabaseUrlError && err.variable === variable && err.message.startsWith(variable));
    });
  }
});

describe('migrations from PG* variables, several processes at once', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  before(async () => {
    db = await createTestDatabase({ migrated: false });
  });
  after(() => db?.drop());

  test('four concurrent runs all succeed (they wait for the advisory lock) and apply each migration once', async () => {
    const u = new URL(db.url);
    const url = /** @type {string} */ (databaseUrlFromEnv({
      PGHOST: u.hostname, PGPORT: u.port, PGUSER: decodeURIComponent(u.username), PGPASSWORD: decodeURIComponent(u.password) || 'unused',
      PGDATABASE: u.pathname.slice(1), PGSSLMODE: 'disable',
    }));
    const runs = await Promise.all(Array.from({ length: 4 }, () => migrate(url)));
    const applied = runs.flat();
    assert.ok(applied.length > 0, 'the fresh database had migrations to apply');
    assert.equal(new Set(applied).size, applied.length, 'no migration was applied twice');
    const { rows } = await db.pool.query('SELECT count(*)::int AS n FROM pgmigrations');
    assert.equal(rows[0].n, applied.length);
    assert.equal((await db.pool.query("SELECT to_regclass('public.users') IS NOT NULL AS ok")).rows[0].ok, true);
  });
});
