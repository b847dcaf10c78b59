import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { waitUntil } from '../../../test/support/wait.js';
import { makeUsers } from '../../../test/support/users.js';

// A 64 KiB budget: 60 KiB for large bodies, a 4 KiB reserve for small ones (bodies up to 4 KiB).
const SMALL_BUDGET = { ADMISSION_BUDGET_BYTES: String(64 * 1024), LOG_LEVEL: 'warn' };

/**
 * A POST /users whose headers go out at once and whose body is sent only when asked: it shows what
 * the service answers before reading a body.
 * @param {string} baseUrl @param {Record<string, string | number>} headers
 */
function openRequest(baseUrl, headers) {
  const req = http.request(`${baseUrl}/users`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    agent: false,
  });
  req.on('error', () => {});
  /** @type {Promise<{ status: number, retryAfter?: string, body: any }>} */
  const answer = new Promise((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res
        .setEncoding('utf8')
        .on('data', (c) => (text += c))
        .on('end', () => {
          const retryAfter = res.headers['retry-after'];
          resolve({
            status: /** @type {number} */ (res.statusCode),
            retryAfter,
            body: text ? JSON.parse(text) : undefined,
          });
        });
    });
    req.on('close', () => reject(new Error('closed without an answer')));
  });
  answer.catch(() => {});
  req.flushHeaders();
  return { req, answer };
}

/** @param {number} n users whose JSON is about n × 150 bytes */
const usersJson = (n) => JSON.stringify(makeUsers(n));

/** @param {string} baseUrl @param {string} line the start of a metric line, e.g. 'sluice_admission_shed_total{reason="queue_full"}' */
async function metricValue(baseUrl, line) {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
}

describe('admission control on POST /users, refusing at once (ADMISSION_WAIT_MS=0)', () => {
  const ctx = useAppAndDatabase({ ...SMALL_BUDGET, ADMISSION_WAIT_MS: '0' });

  test('a request over the budget gets 503 + Retry-After before its body is sent; small ones still pass; an abort releases', async () => {
    const { baseUrl } = ctx.app;
    const holderBody = usersJson(300);
    assert.ok(
      holderBody.length > 50_000 && holderBody.length < 60 * 1024,
      `holder body ${holderBody.length} bytes`,
    );
    // Admitted: holds 50+ KiB of the 60 KiB large share while its body trickles in.
    const holder = openRequest(baseUrl, { 'content-length': Buffer.byteLength(holderBody) });
    holder.req.write(holderBody.slice(0, 1000));
    await waitUntil(
      async () =>
        (await metricValue(baseUrl, 'sluice_admission_in_flight_bytes{lane="large"}')) ===
        holderBody.length,
      'the holder admitted',
      5000,
      20,
    );

    // Headers only: the service must answer without the body it was promised.
    const refused = openRequest(baseUrl, { 'content-length': 20_000 });
    const answer = await refused.answer;
    assert.equal(answer.status, 503);
    assert.equal(answer.retryAfter, '1');
    assert.equal(answer.body.error, 'overloaded');
    refused.req.destroy();

    // A single user goes through the reserve meanwhile.
    const single = makeUsers(1);
    const small = await ctx.app.postUsers(single);
    assert.equal(small.status, 201);

    // The client gives up: its bytes come back, and a large request fits again.
    holder.req.destroy();
    await waitUntil(
      async () =>
        (await metricValue(baseUrl, 'sluice_admission_in_flight_bytes{lane="large"}')) === 0,
      'the holder released',
      5000,
      20,
    );
    const large = makeUsers(300);
    assert.equal((await ctx.app.postUsers(large)).status, 201);
    assert.equal((await ctx.db.usersByEmail([...single, ...large].map((u) => u.email))).size, 301);
    assert.equal(await metricValue(baseUrl, 'sluice_admission_shed_total{reason="queue_full"}'), 1);
    assert.equal(await metricValue(baseUrl, 'sluice_admission_in_flight_bytes{lane="small"}'), 0);
  });

  test('a chunked body is counted as it is read, and cut off with 503 when it outgrows the budget; nothing written', async () => {
    const { baseUrl } = ctx.app;
    const holderBody = usersJson(300);
    const holder = openRequest(baseUrl, { 'content-length': Buffer.byteLength(holderBody) });
    holder.req.write(holderBody.slice(0, 1000));
    await waitUntil(
      async () =>
        (await metricValue(baseUrl, 'sluice_admission_in_flight_bytes{lane="large"}')) ===
        holderBody.length,
      'the holder admitted',
      5000,
      20,
    );

    const users = makeUsers(100);
    const req = openRequest(baseUrl, { 'transfer-encoding': 'chunked' });
    const body = JSON.stringify(users);
    for (let i = 0; i < body.length; i += 8192) req.req.write(body.slice(i, i + 8192));
    req.req.end();
    const answer = await req.answer;
    assert.equal(answer.status, 503);
    assert.equal(answer.retryAfter, '1');
    assert.equal((await ctx.db.usersByEmail(users.map((u) => u.email))).size, 0);
    assert.equal(await metricValue(baseUrl, 'sluice_admission_shed_total{reason="overflow"}'), 1);
    assert.equal(
      await metricValue(baseUrl, 'sluice_admission_in_flight_bytes{lane="large"}'),
      holderBody.length,
      'the cut-off body holds nothing',
    );
    holder.req.end(holderBody.slice(1000));
    assert.equal((await holder.answer).status, 201);
  });

  test('a chunked body that fits is stored', async () => {
    const users = makeUsers(100);
    const req = openRequest(ctx.app.baseUrl, { 'transfer-encoding': 'chunked' });
    const body = JSON.stringify(users);
    for (let i = 0; i < body.length; i += 4096) req.req.write(body.slice(i, i + 4096));
    req.req.end();
    assert.equal((await req.answer).status, 201);
    assert.equal((await ctx.db.usersByEmail(users.map((u) => u.email))).size, 100);
  });
});

describe('admission control on POST /users, waiting (ADMISSION_WAIT_MS=10000)', () => {
  const ctx = useAppAndDatabase({ ...SMALL_BUDGET, ADMISSION_WAIT_MS: '10000' });

  test('a request that does not fit waits, and is served as soon as the one before it ends', async () => {
    const { baseUrl } = ctx.app;
    const first = makeUsers(300);
    const firstBody = JSON.stringify(first);
    const holder = openRequest(baseUrl, { 'content-length': Buffer.byteLength(firstBody) });
    holder.req.write(firstBody.slice(0, 1000));
    await waitUntil(
      async () =>
        (await metricValue(baseUrl, 'sluice_admission_in_flight_bytes{lane="large"}')) ===
        firstBody.length,
      'the first admitted',
      5000,
      20,
    );

    const second = makeUsers(300);
    const waiting = ctx.app.postUsers(second);
    await waitUntil(
      async () => (await metricValue(baseUrl, 'sluice_admission_waiting_requests')) === 1,
      'the second waiting',
      5000,
      20,
    );

    holder.req.end(firstBody.slice(1000));
    assert.equal((await holder.answer).status, 201);
    assert.equal((await waiting).status, 201);
    assert.equal((await ctx.db.usersByEmail([...first, ...second].map((u) => u.email))).size, 600);
    // Exported from the start: zero, none shed for waiting too long.
    assert.equal(await metricValue(baseUrl, 'sluice_admission_shed_total{reason="timeout"}'), 0);
  });
});

// In a burst, a client refused by admission control got EPIPE instead of its 503: the
// service answered and closed while the client was still sending its body.
describe('a refusal reaches the client: 100-continue honoured, a body sent anyway read and dropped', () => {
  const ctx = useAppAndDatabase({
    ...SMALL_BUDGET,
    ADMISSION_WAIT_MS: '0',
    INGEST_TOKEN: 'refusal-test-token',
  });
  const auth = { authorization: 'Bearer refusal-test-token' };

  /** Holds most of the large share, its body never sent, until released. */
  async function holdTheBudget() {
    const holder = openRequest(ctx.app.baseUrl, { ...auth, 'content-length': 60_000 });
    await waitUntil(
      async () =>
        (await metricValue(ctx.app.baseUrl, 'sluice_admission_in_flight_bytes{lane="large"}')) ===
        60_000,
      'the holder admitted',
      5000,
      20,
    );
    return () => holder.req.destroy();
  }

  test('Expect: 100-continue: refused with 503 + Retry-After and no 100 Continue; admitted, 100 Continue, then 201', async () => {
    const release = await holdTheBudget();
    const body = usersJson(60);
    let continued = false;
    const refused = openRequest(ctx.app.baseUrl, {
      ...auth,
      'content-length': Buffer.byteLength(body),
      expect: '100-continue',
    });
    refused.req.on('continue', () => (continued = true));
    const answer = await refused.answer;
    assert.equal(answer.status, 503);
    assert.equal(answer.retryAfter, '1');
    assert.equal(continued, false, 'no 100 Continue for a refused request: its body is never sent');
    release();

    const admitted = openRequest(ctx.app.baseUrl, {
      ...auth,
      'content-length': Buffer.byteLength(body),
      expect: '100-continue',
    });
    admitted.req.on('continue', () => {
      continued = true;
      admitted.req.end(body);
    });
    const ok = await admitted.answer;
    assert.equal(continued, true);
    assert.equal(ok.status, 201, JSON.stringify(ok.body));
    assert.equal(ok.body.inserted, 60);
  });

  test('a wrong token with Expect: 100-continue: 401 at once, the body never asked for', async () => {
    const admitted = openRequest(ctx.app.baseUrl, {
      authorization: 'Bearer wrong',
      'content-length': 5000,
      expect: '100-continue',
    });
    let continued = false;
    admitted.req.on('continue', () => (continued = true));
    assert.equal((await admitted.answer).status, 401);
    assert.equal(continued, false);
  });

  test('a client that sends its whole body anyway reads its 503 (no reset), and its connection stays usable', async () => {
    const release = await holdTheBudget();
    try {
      // 400 KiB sent at once, no Expect: the answer comes before the body is read.
      const big = ' '.repeat(400 * 1024 - 2);
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      /** @param {string} body @param {Record<string, string | number>} headers */
      const send = (body, headers = {}) =>
        new Promise((resolve, reject) => {
          const req = http.request(
            `${ctx.app.baseUrl}/users`,
            {
              method: 'POST',
              agent,
              headers: {
                ...auth,
                'content-type': 'application/json',
                'content-length': Buffer.byteLength(body),
                ...headers,
              },
            },
            (res) => {
              let text = '';
              res
                .setEncoding('utf8')
                .on('data', (c) => (text += c))
                .on('end', () =>
                  resolve({
                    status: res.statusCode,
                    retryAfter: res.headers['retry-after'],
                    socket: req.socket,
                    text,
                  }),
                );
            },
          );
          req.on('error', reject);
          req.end(body);
        });
      const refused = /** @type {any} */ (await send(`[${big}]`));
      assert.equal(refused.status, 503);
      assert.equal(refused.retryAfter, '1');
      const firstSocket = refused.socket;
      release();
      await waitUntil(
        async () =>
          (await metricValue(ctx.app.baseUrl, 'sluice_admission_in_flight_bytes{lane="large"}')) ===
          0,
        'the budget free',
        5000,
        20,
      );
      const next = /** @type {any} */ (await send(JSON.stringify(makeUsers(2))));
      assert.equal(next.status, 201, next.text);
      assert.equal(
        next.socket,
        firstSocket,
        'the same kept-alive connection: the refused body was read to its end',
      );
      agent.destroy();
    } finally {
      release();
    }
  });
});
