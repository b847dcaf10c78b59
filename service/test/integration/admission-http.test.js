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
  const req = http.request(`${baseUrl}/users`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, agent: false });
  req.on('error', () => {});
  /** @type {Promise<{ status: number, retryAfter?: string, body: any }>} */
  const answer = new Promise((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c) => (text += c)).on('end', () => {
        const retryAfter = res.headers['retry-after'];
        resolve({ status: /** @type {number} */ (res.statusCode), retryAfter, body: text ? JSON.parse(text) : undefined });
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
    assert.ok(holderBody.length > 50_000 && holderBody.length < 60 * 1024, `holder body ${holderBody.length} bytes`);
    // Admitted: holds 50+ KiB of the 60 KiB large share while its body trickles in.
    const holder = openRequest(baseUrl, { 'content-length': Buffer.byteLength(holderBody) });
    holder.req.write(holderBody.slice(0, 1000));
    await waitUntil(async () => (await metricValue(baseUrl, 'sluice_admission_in_flight_bytes{lane="large"}')) === holderBody.length, 'the holder admitted', 5000, 20);

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
    await waitUntil(async () => (await metricValue(baseUrl, 'sluice_admission_in_flight_bytes{lane="large"}')) === 0, 'the holder released', 5000, 20);
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
    await waitUntil(async () => (await metricValue(baseUrl, 'sluice_admission_in_flight_bytes{lane="large"}')) === holderBody.length, 'the holder admitted', 5000, 20);

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
    assert.equal(await metricValue(baseUrl, 'sluice_admission_in_flight_bytes{lane="large"}'), holderBody.length, 'the cut-off body holds nothing');
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
    await waitUntil(async () => (await metricValue(baseUrl, 'sluice_admission_in_flight_bytes{lane="large"}')) === firstBody.length, 'the first admitted', 5000, 20);

    const second = makeUsers(300);
    const waiting = ctx.app.postUsers(second);
    await waitUntil(async () => (await metricValue(baseUrl, 'sluice_admission_waiting_requests')) === 1, 'the second waiting', 5000, 20);

    holder.req.end(firstBody.slice(1000));
    assert.equal((await holder.answer).status, 201);
    assert.equal((await waiting).status, 201);
    assert.equal((await ctx.db.usersByEmail([...first, ...second].map((u) => u.email))).size, 600);
    assert.equal(await metricValue(baseUrl, 'sluice_admission_shed_total{reason="timeout"}'), undefined);
  });
});
