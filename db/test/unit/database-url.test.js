import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError } from '@sluice/env';
import pg from 'pg';
import { databaseUrlFromEnv } from '../../src/database-url.js';

describe('databaseUrlFromEnv (unit)', () => {
  test('DATABASE_URL wins when set', () => {
    assert.equal(
      databaseUrlFromEnv({ DATABASE_URL: 'postgres://a@b/c', PGHOST: 'ignored' }),
      'postgres://a@b/c',
    );
  });

  test('neither DATABASE_URL nor PGHOST: undefined, so the caller says what is missing', () => {
    assert.equal(databaseUrlFromEnv({}), undefined);
  });

  test('PG* variables, as ECS injects them, become a URL with the password percent-encoded', () => {
    const url = databaseUrlFromEnv({
      PGHOST: 'db.example.internal',
      PGPORT: '6432',
      PGUSER: 'sluice',
      PGPASSWORD: 'p@ss:w/rd%?#',
      PGDATABASE: 'users',
      PGSSLMODE: 'verify-full',
    });
    assert.equal(
      url,
      'postgresql://sluice:p%40ss%3Aw%2Frd%25%3F%23@db.example.internal:6432/users?sslmode=verify-full',
    );
    const parsed = new URL(/** @type {string} */ (url));
    assert.equal(decodeURIComponent(parsed.password), 'p@ss:w/rd%?#');
  });

  test("a password holding / # % @ : reaches pg as it is (docker-compose.yml's PG* variables)", () => {
    const password = 'a/b#c%d@e:f%zz';
    const url = databaseUrlFromEnv({ PGHOST: 'postgres', PGUSER: 'sluice', PGPASSWORD: password });
    const parsed = new pg.Client({ connectionString: url }).connectionParameters;
    assert.deepEqual(
      [parsed.user, parsed.password, parsed.host, parsed.port, parsed.database],
      ['sluice', password, 'postgres', 5432, 'sluice'],
    );
  });

  test('port defaults to 5432, the database to the user, and no sslmode is added unless asked', () => {
    assert.equal(
      databaseUrlFromEnv({ PGHOST: 'h', PGUSER: 'u', PGPASSWORD: 'p' }),
      'postgresql://u:p@h:5432/u',
    );
  });

  for (const [variable, env] of /** @type {[string, NodeJS.ProcessEnv][]} */ ([
    ['PGUSER', { PGHOST: 'h', PGPASSWORD: 'p' }],
    ['PGPASSWORD', { PGHOST: 'h', PGUSER: 'u' }],
    ['PGPORT', { PGHOST: 'h', PGUSER: 'u', PGPASSWORD: 'p', PGPORT: 'x' }],
    ['PGSSLMODE', { PGHOST: 'h', PGUSER: 'u', PGPASSWORD: 'p', PGSSLMODE: 'sometimes' }],
  ])) {
    test(`a missing or bad ${variable} is refused with its name`, () => {
      assert.throws(
        () => databaseUrlFromEnv(env),
        (err) =>
          err instanceof ConfigError &&
          err.variable === variable &&
          err.message.startsWith(variable),
      );
    });
  }
});
