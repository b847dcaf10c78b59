import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

describe('configuration (unit)', () => {
  test('defaults follow the contract', () => {
    const c = loadConfig({});
    assert.equal(c.port, 3000);
    assert.equal(c.maxBatchItems, 10_000);
    assert.equal(c.maxBodyBytes, 10 * 1024 * 1024);
    assert.equal(c.insertChunkRows, 1000);
    assert.equal(c.insertStrategy, 'format');
    assert.equal(c.workers, 0);
    assert.equal(c.databaseUrl, undefined);
    assert.equal(c.ingestToken, undefined);
    assert.equal(c.admissionBudgetBytes, 4 * 1024 * 1024);
    assert.equal(c.admissionWaitMs, 2000);
  });

  test('WORKERS=auto means one per core', () => {
    assert.ok(loadConfig({ WORKERS: 'auto' }).workers >= 1);
  });

  test('without DATABASE_URL, the PG* variables that ECS injects from the RDS secret name the database', () => {
    const c = loadConfig({ PGHOST: 'db.internal', PGUSER: 'sluice', PGPASSWORD: 's3cr@t', PGDATABASE: 'sluice', PGSSLMODE: 'verify-full' });
    assert.equal(c.databaseUrl, 'postgresql://sluice:s3cr%40t@db.internal:5432/sluice?sslmode=verify-full');
    assert.throws(() => loadConfig({ PGHOST: 'db.internal', PGUSER: 'sluice' }), (err) => err instanceof ConfigError && err.message.startsWith('PGPASSWORD'));
  });

  for (const [variable, value] of [
    ['PORT', 'eighty'], ['PORT', '70000'], ['MAX_BATCH_ITEMS', '0'], ['MAX_BODY_BYTES', '-5'],
    ['INSERT_CHUNK_ROWS', '1.5'], ['INSERT_STRATEGY', 'magic'], ['WORKERS', 'many'], ['DB_POOL_MAX', ''.padEnd(3, 'x')],
    ['DATABASE_URL', 'mysql://x'], ['LOG_LEVEL', 'loud'],
    ['ADMISSION_BUDGET_BYTES', '1000'], ['ADMISSION_BUDGET_BYTES', '8MB'], ['ADMISSION_WAIT_MS', '-1'],
  ]) {
    test(`a bad ${variable} (${value}) stops start-up with a message naming it`, () => {
      assert.throws(() => loadConfig({ [variable]: value }), (err) => err instanceof ConfigError && err.message.startsWith(variable));
    });
  }
});
