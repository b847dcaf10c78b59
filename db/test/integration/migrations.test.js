import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { runner } from 'node-pg-migrate';
import pg from 'pg';
import { MIGRATIONS_DIR, MIGRATIONS_TABLE, migrate } from '../../src/migrate.js';
import { createTestDatabase } from '../../../test/support/database.js';

describe('migrations 0002 to 0004 alter a table that already holds users, in place', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  before(async () => {
    db = await createTestDatabase({ migrated: false });
    // 0001 only, as a deployment of the first version has it, with users in it.
    await runner({
      databaseUrl: db.url,
      dir: MIGRATIONS_DIR,
      migrationsTable: MIGRATIONS_TABLE,
      direction: 'up',
      count: 1,
      log: () => {},
    });
    await db.pool.query(`INSERT INTO users (email, name, phone, password_hash) VALUES
      ('ada@example.com', 'Ada', '+441234567', NULL), ('alan@example.com', 'Alan', NULL, '$argon2id$v=19$x')`);
    assert.deepEqual((await migrate(db.url)).slice(0, 3), [
      '0002_cheaper_users_row',
      '0003_users_updated_at',
      '0004_users_changed_at',
    ]);
  });
  after(() => db?.drop());

  test('the users are kept, never yet updated, without an ordering value; email is the primary key, in byte order; id is gone', async () => {
    const { rows } = await db.pool.query(
      'SELECT email, name, phone, password_hash, updated_at, changed_at FROM users ORDER BY email',
    );
    assert.deepEqual(rows, [
      {
        email: 'ada@example.com',
        name: 'Ada',
        phone: '+441234567',
        password_hash: null,
        updated_at: null,
        changed_at: null,
      },
      {
        email: 'alan@example.com',
        name: 'Alan',
        phone: null,
        password_hash: '$argon2id$v=19$x',
        updated_at: null,
        changed_at: null,
      },
    ]);
    const columns = await db.pool.query(
      "SELECT column_name, collation_name FROM information_schema.columns WHERE table_name = 'users' ORDER BY ordinal_position",
    );
    assert.deepEqual(
      columns.rows.map((c) => c.column_name),
      ['email', 'name', 'phone', 'password_hash', 'created_at', 'updated_at', 'changed_at'],
    );
    assert.equal(columns.rows[0].collation_name, 'C');
    const pk = await db.pool.query(
      "SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = 'users_pkey'",
    );
    assert.equal(pk.rows[0].def, 'PRIMARY KEY (email)');
  });

  test('the CHECKs still refuse what no writer may store', async () => {
    const client = new pg.Client(db.url);
    await client.connect();
    try {
      for (const [email, name, phone, hash] of [
        ['Upper@example.com', 'U', null, null],
        ['no-at-sign', 'N', null, null],
        ['empty-name@example.com', '', null, null],
        ['phone@example.com', 'P', '441234567', null],
        ['hash@example.com', 'H', null, 'hunter2'],
        [`${'x'.repeat(1010)}@example.com`, 'Long', null, null],
      ]) {
        await assert.rejects(
          client.query(
            'INSERT INTO users (email, name, phone, password_hash) VALUES ($1, $2, $3, $4)',
            [email, name, phone, hash],
          ),
          { code: '23514' },
          email.slice(0, 40),
        );
      }
      await client.query("INSERT INTO users (email, name) VALUES ('fine@example.com', 'Fine')");
      await assert.rejects(
        client.query("INSERT INTO users (email, name) VALUES ('fine@example.com', 'Again')"),
        { code: '23505' },
      );
    } finally {
      await client.end();
    }
  });
});

describe('migration 0007 scopes the quarantine rows it finds, by no credential of today', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  before(async () => {
    db = await createTestDatabase({ migrated: false });
    await runner({
      databaseUrl: db.url,
      dir: MIGRATIONS_DIR,
      migrationsTable: MIGRATIONS_TABLE,
      direction: 'up',
      count: 6,
      log: () => {},
    });
    await db.pool
      .query(`INSERT INTO quarantined_items (client, request_id, format, item_sha256, position, reason, errors, item)
      VALUES ('bob', 'r1', 'json', '\\x01', 0, 'invalid_user', '[]', '{"email":"x"}'),
             ('anonymous', 'r2', 'json', '\\x01', 0, 'invalid_user', '[]', '{"email":"x"}')`);
    assert.deepEqual(await migrate(db.url), [
      '0007_quarantine_scopes',
      '0008_idempotency_outcomes',
      '0009_client_rates',
      '0010_erasures',
    ]);
  });
  after(() => db?.drop());

  test("each row kept, its scope unscoped: and its client's name; a token bob's row of the same item is another", async () => {
    const { rows } = await db.pool.query(
      'SELECT client, client_scope, request_id, client_request_id, truncated, row_bytes FROM quarantined_items ORDER BY id',
    );
    assert.deepEqual(rows, [
      {
        client: 'bob',
        client_scope: 'unscoped:bob',
        request_id: 'r1',
        client_request_id: null,
        truncated: false,
        row_bytes: 15,
      },
      {
        client: 'anonymous',
        client_scope: 'unscoped:anonymous',
        request_id: 'r2',
        client_request_id: null,
        truncated: false,
        row_bytes: 15,
      },
    ]);
    await db.pool
      .query(`INSERT INTO quarantined_items (client_scope, client, request_id, format, item_sha256, position, reason, errors, item)
      VALUES ('token:bob', 'bob', 'r3', 'json', '\\x01', 0, 'invalid_user', '[]', '{"email":"x"}')`);
    await assert.rejects(
      db.pool
        .query(`INSERT INTO quarantined_items (client_scope, client, request_id, format, item_sha256, position, reason, errors, item)
      VALUES ('token:bob', 'bob', 'r4', 'json', '\\x01', 0, 'invalid_user', '[]', '{}')`),
      { code: '23505', constraint: 'quarantined_items_once' },
    );
  });
});
