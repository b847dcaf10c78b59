import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createOpenApiDocument, postUsersExamples } from '../../src/openapi.js';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { makeUsers } from '../../../test/support/users.js';
import { responseChecker } from '../../../test/support/openapi-check.js';

const TOKEN = 'openapi-test-token-0123456789';
const LIMITS = { INGEST_TOKEN: TOKEN, MAX_BATCH_ITEMS: '3', MAX_BODY_BYTES: '4096' };
describe('the examples of docs/api.md against the real service, answers checked against the document', () => {
  const ctx = useAppAndDatabase(LIMITS);
  /** @type {any} */ let doc;
  /** @type {ReturnType<typeof responseChecker>} */ let check;
  before(async () => {
    const res = await fetch(`${ctx.app.baseUrl}/openapi.json`);
    assert.equal(res.status, 200);
    doc = await res.json();
    check = responseChecker(doc);
  });
  const post = async (
    /** @type {unknown} */ body,
    /** @type {Parameters<typeof ctx.app.postUsers>[1]} */ options = { token: TOKEN },
  ) => {
    const res = await ctx.app.postUsers(body, options);
    check('post', '/users', res);
    return res;
  };

  test('GET /openapi.json serves the document for this configuration', () => {
    assert.deepEqual(doc, createOpenApiDocument(ctx.app.config));
    assert.equal(
      doc.paths['/users'].post.requestBody.content['application/json'].schema.maxItems,
      3,
    );
  });

  test('each example request gets the documented status and exactly the example answer', async () => {
    for (const [name, example] of Object.entries(postUsersExamples(ctx.app.config.maxBatchItems))) {
      const res = await post(example.request, {
        token: TOKEN,
        headers: 'prefer' in example ? { prefer: example.prefer } : {},
      });
      assert.equal(res.status, example.status, `${name}: ${res.text}`);
      assert.deepEqual(res.body, example.response, name);
      assert.deepEqual(
        doc.paths['/users'].post.responses[example.status].content['application/json'].examples[
          name
        ].value,
        example.response,
      );
    }
    assert.equal(await ctx.db.countUsers(), 1, 'only `new` was written');
  });

  test('malformed JSON, no token, too many users, too large, wrong type: each as documented', async () => {
    assert.equal((await post('[{"email": ')).body.error, 'malformed_json');
    const unauthorized = await post([], {});
    assert.equal(unauthorized.status, 401);
    const tooMany = await post(makeUsers(4));
    assert.deepEqual(tooMany.body, {
      error: 'too_many_items',
      message: '4 users is over MAX_BATCH_ITEMS (3); split the batch',
      code: 'PGRST102',
      details: null,
      hint: null,
    });
    assert.equal(
      (await post(JSON.stringify([{ email: 'big@example.com', name: 'x'.repeat(5000) }]))).body
        .error,
      'payload_too_large',
    );
    assert.equal((await post('[]', { token: TOKEN, contentType: 'text/plain' })).status, 415);
  });

  test('the health routes answer as documented', async () => {
    for (const path of ['/healthz', '/readyz']) {
      const res = await fetch(`${ctx.app.baseUrl}${path}`);
      check('get', path, { status: res.status, headers: res.headers, body: await res.json() });
      assert.equal(res.status, 200);
    }
    const metrics = await fetch(`${ctx.app.baseUrl}/metrics`);
    assert.equal(metrics.status, 200);
    assert.match(metrics.headers.get('content-type') ?? '', /^text\/plain/);
  });

  describe('when the database is missing its schema, or unreachable', () => {
    /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let empty;
    /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let unmigrated;
    /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let unreachable;
    before(async () => {
      empty = await createTestDatabase({ migrated: false });
      unmigrated = await startTestApp({ databaseUrl: empty.url });
      // Port 1 on loopback: nothing listens, the connection is refused at once.
      unreachable = await startTestApp({
        databaseUrl: 'postgres://sluice@127.0.0.1:1/none',
        env: { DB_CONNECT_TIMEOUT_MS: '1000' },
      });
    });
    after(async () => {
      await unmigrated?.close();
      await unreachable?.close();
      await empty?.drop();
    });

    test('500 with an error id, 503 with Retry-After, readiness 503', async () => {
      const internal = await unmigrated.postUsers(makeUsers(1));
      check('post', '/users', internal);
      assert.equal(internal.status, 500);
      const down = await unreachable.postUsers(makeUsers(1));
      check('post', '/users', down);
      assert.equal(down.status, 503);
      const ready = await fetch(`${unreachable.baseUrl}/readyz`);
      check('get', '/readyz', {
        status: ready.status,
        headers: ready.headers,
        body: await ready.json(),
      });
      assert.equal(ready.status, 503);
    });
  });
});
