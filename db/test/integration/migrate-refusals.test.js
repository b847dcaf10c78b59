import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { PG_MIGRATE_LOCK_ID } from 'node-pg-migrate';
import pg from 'pg';
import { MIGRATIONS_TABLE, migrate } from '../../src/migrate.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { waitUntil } from '../../../test/support/wait.js';

/** @param {string} name */
const createTable = (name) =>
  `-- Up Migration\nCREATE TABLE ${name} (id int);\n-- Down Migration\nDROP TABLE ${name};\n`;

describe('migrate(): all pending migrations or none, in order, inside its transaction', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {string} */ let dir;
  before(async () => {
    db = await createTestDatabase({ migrated: false });
    dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-migrations-'));
  });
  after(async () => {
    await db?.drop();
    await rm(dir, { recursive: true, force: true });
  });

  /** @param {string} name */
  const exists = async (name) =>
    (await db.pool.query('SELECT to_regclass($1) IS NOT NULL AS ok', [`public.${name}`])).rows[0]
      .ok;
  const applied = async () =>
    (await exists(MIGRATIONS_TABLE))
      ? (await db.pool.query(`SELECT name FROM ${MIGRATIONS_TABLE} ORDER BY run_on, id`)).rows.map(
          (r) => r.name,
        )
      : [];

  test('a failing migration rolls back every pending one, the migrations table included; mended, all apply', async () => {
    await writeFile(path.join(dir, '0001_first.sql'), createTable('first_table'));
    await writeFile(path.join(dir, '0002_second.sql'), createTable('second_table'));
    await writeFile(
      path.join(dir, '0003_broken.sql'),
      '-- Up Migration\nCREATE TABLE third_table (id int REFERENCES no_such_table);\n',
    );
    await assert.rejects(migrate(db.url, { dir }), { code: '42P01' });
    assert.equal(await exists('first_table'), false);
    assert.equal(await exists('second_table'), false);
    assert.deepEqual(await applied(), []);

    await writeFile(path.join(dir, '0003_broken.sql'), createTable('third_table'));
    assert.deepEqual(await migrate(db.url, { dir }), ['0001_first', '0002_second', '0003_broken']);
    assert.deepEqual(await applied(), ['0001_first', '0002_second', '0003_broken']);
  });

  test('a migration older than one already applied is refused, and nothing of the run is applied', async () => {
    await writeFile(path.join(dir, '0002a_late.sql'), createTable('late_table'));
    await writeFile(path.join(dir, '0004_next.sql'), createTable('next_table'));
    try {
      await assert.rejects(
        migrate(db.url, { dir }),
        /Not run migration 0002a_late is preceding already run migration/,
      );
      assert.equal(await exists('late_table'), false);
      assert.equal(await exists('next_table'), false);
      assert.deepEqual(await applied(), ['0001_first', '0002_second', '0003_broken']);
    } finally {
      await rm(path.join(dir, '0002a_late.sql'));
    }
  });

  test('a migration that must run outside a transaction is refused, and nothing of the run is applied', async () => {
    await writeFile(
      path.join(dir, '0005_concurrently.cjs'),
      `exports.up = (pgm) => { pgm.noTransaction(); pgm.sql('CREATE INDEX CONCURRENTLY next_table_id ON next_table (id)'); };\n`,
    );
    try {
      await assert.rejects(
        migrate(db.url, { dir }),
        /a migration asks to run outside a transaction/,
      );
      assert.equal(await exists('next_table'), false, '0004 before it, rolled back too');
      assert.deepEqual(await applied(), ['0001_first', '0002_second', '0003_broken']);
    } finally {
      await rm(path.join(dir, '0005_concurrently.cjs'));
    }
  });

  test("a run waits for node-pg-migrate's own session lock, then applies what is pending", async () => {
    const holder = new pg.Client(db.url);
    await holder.connect();
    try {
      await holder.query(`SELECT pg_advisory_lock(${PG_MIGRATE_LOCK_ID})`);
      const run = migrate(db.url, { dir });
      const waiting = () =>
        db.pool.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'sluice-migrate' AND wait_event_type = 'Lock' AND datname = current_database()",
        );
      await waitUntil(
        async () => (await waiting()).rows[0].n === 1,
        'the run waiting for the lock',
        10_000,
        20,
      );
      assert.equal(await exists('next_table'), false, 'nothing applied while the lock is held');
      await holder.query(`SELECT pg_advisory_unlock(${PG_MIGRATE_LOCK_ID})`);
      assert.deepEqual(await run, ['0004_next']);
      assert.equal(await exists('next_table'), true);
    } finally {
      await holder.end();
    }
  });
});
