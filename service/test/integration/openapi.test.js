import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createOpenApiDocument, postUsersExamples } from '../../src/openapi.js';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { makeUsers } from '../../../test/support/users.js';
import { responseChecker } from '../../../test/support/openapi-check.js';

const TOKEN = 'openapi-test-token-0123456789';
const LIMITS = {
  INGEST_TOKEN: TOKEN,
  MAX_BATCH_ITEMS: '3',
  MAX_BODY_BYTES: '4096',
  ERASURE_KEY: 'an erasure key of forty characters, test!',
};
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

  /**
   * A request to the service, its answer checked against the document.
   * @param {string} method @param {string} path
   * @param {{ headers?: Record<string, string>, body?: unknown }} [options]
   */
  const send = async (method, path, { headers = {}, body } = {}) => {
    const res = await fetch(`${ctx.app.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${TOKEN}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      body: body === undefined || typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    const answer = { status: res.status, headers: res.headers, body: text && JSON.parse(text) };
    check(method.toLowerCase(), path.split('?')[0], answer);
    return answer;
  };

  test("the routes that erase: PostgREST's delete, the bulk form's example, the replay, 405", async () => {
    const [a, b, c] = makeUsers(3);
    const keyed = {
      token: TOKEN,
      headers: { 'idempotency-key': '"openapi-erase"', prefer: 'return=representation' },
    };
    assert.equal((await post([a, b], keyed)).status, 201);
    const one = await send('DELETE', `/users?email=eq.${a.email}`, {
      headers: { prefer: 'return=representation, count=exact' },
    });
    assert.equal(one.status, 200);
    assert.deepEqual(
      one.body.map((/** @type {any} */ r) => r.email),
      [a.email],
    );
    assert.equal(one.headers.get('content-range'), '*/1');
    const several = await send('DELETE', `/users?email=in.(${b.email},${c.email})`, {
      headers: { prefer: 'count=exact' },
    });
    assert.deepEqual([several.status, several.body], [204, '']);
    assert.equal(several.headers.get('content-range'), '*/1');
    const replay = await post([a, b], keyed);
    assert.deepEqual([replay.status, replay.body], [201, []]);
    assert.equal(replay.headers.get('users-erased'), '2');
    assert.equal(replay.headers.get('idempotent-replayed'), 'true');
    const again = await post([a]);
    assert.deepEqual(again.body, { received: 1, inserted: 0, updated: 0, stale: 1, duplicates: 0 });

    const bulk = doc.paths['/erasures'].post;
    const request = bulk.requestBody.content['application/json'].examples.two.value;
    assert.equal((await post([{ email: request[0].email, name: 'Ada' }])).status, 201);
    const counts = await send('POST', '/erasures', { body: request });
    assert.equal(counts.status, 200);
    assert.deepEqual(
      counts.body,
      bulk.responses[200].content['application/json'].examples.counts.value,
    );
    assert.equal(await ctx.db.countUsers(), 1, 'only new is left');
    const ndjson = {
      body: bulk.requestBody.content['application/x-ndjson'].examples.two.value,
      headers: { 'content-type': 'application/x-ndjson', 'idempotency-key': '"openapi-erasures"' },
    };
    const lines = await send('POST', '/erasures', ndjson);
    assert.deepEqual(lines.body, { received: 2, erased: 0, absent: 2 });
    const replayed = await send('POST', '/erasures', ndjson);
    assert.deepEqual(replayed.body, lines.body);
    assert.equal(replayed.headers.get('idempotent-replayed'), 'true');

    const unfiltered = await send('DELETE', '/users');
    assert.equal(unfiltered.body.error, 'missing_filter');
    const tooMany = await send('DELETE', `/users?email=in.(${makeUsers(4).map((u) => u.email)})`);
    assert.equal(tooMany.body.error, 'too_many_items');
    const notAnArray = await send('POST', '/erasures', { body: { email: a.email } });
    assert.equal(notAnArray.body.error, 'not_an_array');
    const get = await send('GET', '/users');
    assert.deepEqual([get.status, get.headers.get('allow')], [405, 'POST, DELETE']);
    const put = await send('PUT', '/erasures');
    assert.deepEqual([put.status, put.headers.get('allow')], [405, 'POST']);
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
