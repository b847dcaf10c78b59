import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { makeUsers } from '../../../test/support/users.js';

describe('health, readiness and metrics', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let empty;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let unmigrated;
  before(async () => {
    db = await createTestDatabase();
    empty = await createTestDatabase({ migrated: false });
    app = await startTestApp({ databaseUrl: db.url });
    unmigrated = await startTestApp({ databaseUrl: empty.url });
  });
  after(async () => {
    await app.close();
    await unmigrated.close();
    await db.drop();
    await empty.drop();
  });

  test('/healthz answers 200', async () => {
    const res = await fetch(`${app.baseUrl}/healthz`);
    assert.equal(res.status, 200);
    assert.equal((await res.json()).status, 'ok');
  });

  test('/readyz is 200 with the schema in place, 503 without it', async () => {
    assert.equal((await fetch(`${app.baseUrl}/readyz`)).status, 200);
    const res = await fetch(`${unmigrated.baseUrl}/readyz`);
    assert.equal(res.status, 503);
    assert.equal((await res.json()).status, 'not_ready');
  });

  test('a write without the schema is a 500 with an error id that is also in the log, and no stack', async () => {
    const res = await unmigrated.postUsers(makeUsers(2));
    assert.equal(res.status, 500);
    assert.equal(res.body.error, 'internal');
    assert.match(res.body.errorId, /^[0-9a-f-]{36}$/);
    assert.ok(!res.text.includes('at '), 'no stack trace in the answer');
    const logged = unmigrated.logs.find((l) => l.errorId === res.body.errorId);
    assert.ok(logged, 'the error id is in the log');
    assert.equal(logged.level, 50);
  });

  test('/metrics counts requests, users and batch sizes in Prometheus text', async () => {
    await app.postUsers(makeUsers(7));
    const res = await fetch(`${app.baseUrl}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /text\/plain/);
    const text = await res.text();
    assert.match(text, /sluice_users_received_total 7/);
    assert.match(text, /sluice_users_inserted_total 7/);
    assert.match(
      text,
      /sluice_http_requests_total\{method="POST",route="\/users",status="201"\} 1/,
    );
    assert.match(text, /sluice_batch_size_users_bucket\{le="10"\} 1/);
    assert.match(text, /sluice_db_pool_connections\{state="total"\} \d+/);
    assert.match(text, /sluice_db_insert_duration_seconds_count 1/);
  });

  test('a request id is returned, and a sane one from the client is kept', async () => {
    const res = await fetch(`${app.baseUrl}/healthz`, {
      headers: { 'x-request-id': 'feeder-abc.123' },
    });
    assert.equal(res.headers.get('x-request-id'), 'feeder-abc.123');
    const other = await fetch(`${app.baseUrl}/healthz`, {
      headers: { 'x-request-id': 'bad id with spaces' },
    });
    assert.match(other.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
  });
});
