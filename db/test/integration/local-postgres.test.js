import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import pg from 'pg';
import { adminUrl } from '../../../test/support/database.js';
import { startLocalPostgres, tempDataDir } from '../../src/local-postgres.js';

test("locale 'icu-en-US' makes a cluster whose default collation is ICU en-US (what managed services hand out)", async () => {
  const dataDir = await tempDataDir('sluice-icu-test-');
  const server = await startLocalPostgres({ dataDir, persistent: false, locale: 'icu-en-US' });
  try {
    const c = new pg.Client(server.url);
    await c.connect();
    const {
      rows: [db],
    } = await c.query(
      'SELECT datlocprovider, datlocale FROM pg_database WHERE datname = current_database()',
    );
    // Linguistic order: byte order would put 'B' (0x42) before 'a' (0x61).
    const {
      rows: [order],
    } = await c.query("SELECT 'a' < 'B' AS linguistic");
    await c.end();
    assert.deepEqual(db, { datlocprovider: 'i', datlocale: 'en-US' });
    assert.equal(order.linguistic, true);
  } finally {
    await server.stop();
    await rm(path.dirname(dataDir), { recursive: true, force: true });
  }
});

test('an unknown locale is refused, naming the ones there are', async () => {
  await assert.rejects(
    startLocalPostgres({ dataDir: '/nonexistent', locale: /** @type {any} */ ('en_US') }),
    /unknown locale "en_US": one of c, icu-en-US/,
  );
});

test('the default stays byte order (libc C): the cluster npm test started with no locale option', async () => {
  const c = new pg.Client(adminUrl());
  await c.connect();
  const {
    rows: [db],
  } = await c.query(
    'SELECT datlocprovider, datcollate FROM pg_database WHERE datname = current_database()',
  );
  await c.end();
  assert.deepEqual(db, { datlocprovider: 'c', datcollate: 'C' });
});
