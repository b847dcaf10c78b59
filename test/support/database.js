import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate } from '@sluice/db/migrate';

export function adminUrl() {
  const url = process.env.SLUICE_TEST_ADMIN_URL;
  if (!url)
    throw new Error(
      'SLUICE_TEST_ADMIN_URL is unset: run the tests with `npm test`, which starts PostgreSQL',
    );
  return url;
}

/** @param {string} url @param {string} database */
export function withDatabase(url, database) {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

/**
 * A trigger that refuses a user named `poison-<SQLSTATE>` with that SQLSTATE: a value the
 * validator lets through and PostgreSQL refuses, of any class, as a hostile input could cause.
 */
export const POISON_TRIGGER = `
  CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF NEW.name LIKE 'poison-%' THEN
      RAISE EXCEPTION 'poisoned row' USING ERRCODE = substr(NEW.name, 8, 5);
    END IF;
    RETURN NEW;
  END $$;
  CREATE TRIGGER refuse_poison BEFORE INSERT OR UPDATE ON users FOR EACH ROW EXECUTE FUNCTION refuse_poison();`;

/**
 * A fresh, migrated database of this test file's own on the test server, dropped by drop().
 * @param {{ serverUrl?: string, migrated?: boolean }} [options]
 */
export async function createTestDatabase({ serverUrl = adminUrl(), migrated = true } = {}) {
  const name = `sluice_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client(serverUrl);
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = withDatabase(serverUrl, name);
  if (migrated) await migrate(url);
  const pool = new pg.Pool({ connectionString: url, max: 3 });
  pool.on('error', () => {});

  return {
    url,
    pool,
    /** @returns {Promise<number>} */
    async countUsers() {
      const { rows } = await pool.query('SELECT count(*)::int AS n FROM users');
      return rows[0].n;
    },
    /** @param {string[]} emails */
    async usersByEmail(emails) {
      const { rows } = await pool.query(
        'SELECT email, name, phone, password_hash FROM users WHERE email = ANY($1)',
        [emails],
      );
      return new Map(rows.map((r) => [r.email, r]));
    },
    async drop() {
      await pool.end();
      const c = new pg.Client(serverUrl);
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}
