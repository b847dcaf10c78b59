import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { waitUntil } from '../../../test/support/wait.js';
import { makeUsers } from '../../../test/support/users.js';
import { within } from '../../../test/support/time-factor.js';
import { REFUSED_BODY_HOLD_MS } from '../../src/http/unread-body.js';

// A 64 KiB budget: 61,440 bytes for large bodies. Three bodies of about 18 KiB fill it; a fourth waits.
const TOKENS = { noisy: 'tok-fair-noisy', quiet: 'tok-fair-quiet', limited: 'tok-fair-limited' };
const ENV = {
  ADMISSION_BUDGET_BYTES: String(64 * 1024),
  ADMISSION_WAIT_MS: '20000',
  LOG_LEVEL: 'warn',
  INGEST_TOKENS: JSON.stringify({
    noisy: TOKENS.noisy,
    quiet: TOKENS.quiet,
    limited: { token: TOKENS.limited, rate: 50, burst: 50 },
  }),
};

/**
 * A POST /users whose headers go out at once and whose body is sent when the test says;
 * `admitted` resolves on 100 Continue (sent when the request is admitted), `answer` on the response.
 * @param {string} baseUrl @param {string} token @param {Buffer} body
 */
function openRequest(baseUrl, token, body) {
  const req = http.request(`${baseUrl}/users`, {
    method: 'POST',
    agent: false,
    headers: {
      'content-type': 'application/json',
      'content-length': body.length,
      authorization: `Bearer ${token}`,
      expect: '100-continue',
    },
  });
  req.on('error', () => {});
  const admitted = new Promise((resolve) => req.once('continue', resolve));
  /** @type {Promise<{ status: number, headers: http.IncomingHttpHeaders, body: any }>} */
  const answer = new Promise((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res
        .setEncoding('utf8')
        .on('data', (c) => (text += c))
        .on('end', () =>
          resolve({
            status: /** @type {number} */ (res.statusCode),
            headers: res.headers,
            body: text ? JSON.parse(text) : undefined,
          }),
        );
    });
    req.on('close', () => reject(new Error('closed without an answer')));
  });
  answer.catch(() => {});
  req.flushHeaders();
  return { req, admitted, answer, send: () => req.end(body) };
}

/** @param {string} baseUrl @param {string} line */
async function metricValue(baseUrl, line) {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
}

describe('fair admission between clients, over HTTP', () => {
  const ctx = useAppAndDatabase(ENV);

  test('the budget full of one client with a backlog, another client is admitted at the next release', async () => {
    const { baseUrl } = ctx.app;
    const bodyOf = () => {
      const users = makeUsers(110);
      return { users, body: Buffer.from(JSON.stringify(users)) };
    };
    const holders = [bodyOf(), bodyOf(), bodyOf()].map((b) => ({
      ...b,
      ...openRequest(baseUrl, TOKENS.noisy, b.body),
    }));
    assert.ok(
      holders.every((h) => h.body.length > 61_440 / 4 && h.body.length <= 61_440 / 3),
      `bodies of ${holders[0].body.length} bytes`,
    );
    await Promise.all(holders.map((h) => h.admitted));
    // Noisy's backlog waits, then quiet's request behind it.
    const backlog = [bodyOf(), bodyOf(), bodyOf()].map((b) => ({
      ...b,
      ...openRequest(baseUrl, TOKENS.noisy, b.body),
    }));
    await waitUntil(
      async () => (await metricValue(baseUrl, 'sluice_admission_waiting_requests')) === 3,
      'noisy backlog waiting',
      5000,
      20,
    );
    const quiet = { ...bodyOf() };
    const quietRequest = openRequest(baseUrl, TOKENS.quiet, quiet.body);
    await waitUntil(
      async () => (await metricValue(baseUrl, 'sluice_admission_waiting_requests')) === 4,
      'quiet waiting',
      5000,
      20,
    );
    /** @type {string[]} */
    const order = [];
    void quietRequest.admitted.then(() => order.push('quiet'));
    for (const [i, b] of backlog.entries()) void b.admitted.then(() => order.push(`noisy-${i}`));

    // One of noisy's requests is written: the room it leaves is quiet's.
    holders[0].send();
    assert.equal((await holders[0].answer).status, 201);
    await waitUntil(() => order.length > 0, 'someone admitted at the release', 5000, 10);
    assert.deepEqual(order, ['quiet']);
    quietRequest.send();
    assert.equal((await quietRequest.answer).status, 201);
    assert.equal((await ctx.db.usersByEmail(quiet.users.map((u) => u.email))).size, 110);

    // Noisy's backlog is still served, in its order, as its holders finish.
    for (const h of holders.slice(1)) h.send();
    for (const b of backlog) {
      await b.admitted;
      b.send();
    }
    for (const r of [...holders, ...backlog]) assert.equal((await r.answer).status, 201);
    assert.deepEqual(order, ['quiet', 'noisy-0', 'noisy-1', 'noisy-2']);
    assert.equal(await metricValue(baseUrl, 'sluice_client_in_flight_bytes{client="noisy"}'), 0);
    assert.ok(
      /** @type {number} */ (
        await metricValue(baseUrl, 'sluice_client_admission_wait_seconds_count{client="quiet"}')
      ) >= 1,
    );
  });

  test('a client over its rate: 429 with Retry-After and RateLimit fields, read by the client whose body was sent; nothing written', async () => {
    const { baseUrl } = ctx.app;
    const first = makeUsers(40);
    const ok = await ctx.app.postUsers(first, { token: TOKENS.limited });
    assert.equal(ok.status, 201);
    assert.match(String(ok.headers.get('ratelimit-policy')), /^"users";q=50;w=1$/);
    assert.match(String(ok.headers.get('ratelimit')), /^"users";r=\d+;t=\d+$/);

    // Its body is sent whole (fetch): the answer still reaches it, no reset.
    const over = makeUsers(100);
    const refused = await ctx.app.postUsers(over, { token: TOKENS.limited });
    assert.equal(refused.status, 429);
    assert.equal(refused.body.error, 'rate_limited');
    assert.match(refused.body.message, /"limited" is over its rate of 50 users a second/);
    assert.ok(Number(refused.headers.get('retry-after')) >= 1);
    assert.match(String(refused.headers.get('ratelimit-policy')), /^"users";q=50;w=1$/);
    assert.match(String(refused.headers.get('ratelimit')), /^"users";r=\d+;t=\d+$/);
    assert.equal((await ctx.db.usersByEmail(over.map((u) => u.email))).size, 0);
    assert.equal(
      await metricValue(baseUrl, 'sluice_client_refused_total{client="limited",reason="rate"}'),
      1,
    );

    // Another client is not touched by it.
    assert.equal((await ctx.app.postUsers(makeUsers(100), { token: TOKENS.quiet })).status, 201);
    assert.equal(
      await metricValue(baseUrl, 'sluice_client_users_received_total{client="limited"}'),
      40,
    );
  });

  test('a client over its rate that sends on: answered at once, a large body held unread a while, then read, a small one at once; the connection kept', async () => {
    const socket = net.connect(Number(new URL(ctx.app.baseUrl).port), '127.0.0.1');
    await once(socket, 'connect');
    let text = '';
    socket.setEncoding('latin1').on('data', (chunk) => (text += chunk));
    /** @param {string} token @param {Buffer} body */
    const request = (token, body) =>
      Buffer.concat([
        Buffer.from(
          `POST /users HTTP/1.1\r\nHost: sluice\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
        ),
        body,
      ]);
    /** The answers read so far, each status and body. */
    const answers = () =>
      text
        .split('HTTP/1.1 ')
        .slice(1)
        .map((a) => ({ status: Number(a.slice(0, 3)), body: a.slice(a.indexOf('\r\n\r\n') + 4) }));
    const complete = () => answers().every((a) => a.body.endsWith('}'));

    // More than the kernel's buffers on both sides hold: the write ends only once the service reads.
    const filler = Buffer.alloc(8 * 1024 * 1024, 0x20);
    const sent = performance.now();
    let writtenAt = 0;
    socket.write(request(TOKENS.limited, filler), () => (writtenAt = performance.now()));
    await waitUntil(() => answers().length === 1 && complete(), 'the 429', within(10_000), 5);
    const answeredAt = performance.now();
    assert.equal(answers()[0].status, 429);
    assert.equal(JSON.parse(answers()[0].body).error, 'rate_limited');
    assert.ok(
      answeredAt - sent < within(1000),
      `answered in ${answeredAt - sent} ms, before its body was read`,
    );
    assert.equal(writtenAt, 0, 'the body not yet read');

    await waitUntil(() => writtenAt > 0, 'the body read after its hold', within(30_000), 5);
    assert.ok(
      writtenAt - answeredAt >= REFUSED_BODY_HOLD_MS * 0.9,
      `held ${writtenAt - answeredAt} ms`,
    );
    const next = makeUsers(3);
    socket.write(request(TOKENS.quiet, Buffer.from(JSON.stringify(next))));
    await waitUntil(
      () => answers().length === 2 && complete(),
      'the next answer on the same connection',
      within(10_000),
      5,
    );
    assert.equal(answers()[1].status, 201);
    assert.equal((await ctx.db.usersByEmail(next.map((u) => u.email))).size, 3);

    // A small body is read at once: the next request on the connection is not kept waiting. (The
    // bucket has filled again meanwhile: the first, over the burst, is taken and the bucket owes.)
    const [taken, small, after] = [makeUsers(200), makeUsers(200), makeUsers(3)];
    socket.write(request(TOKENS.limited, Buffer.from(JSON.stringify(taken))));
    await waitUntil(
      () => answers().length === 3 && complete(),
      'the request over the burst taken',
      within(10_000),
      5,
    );
    assert.equal(answers()[2].status, 201);
    const smallRequest = request(TOKENS.limited, Buffer.from(JSON.stringify(small)));
    const bodyAt = smallRequest.length - Buffer.byteLength(JSON.stringify(small));
    socket.write(smallRequest.subarray(0, bodyAt));
    await waitUntil(
      () => answers().length === 4 && complete(),
      'the 429 before its small body',
      within(10_000),
      5,
    );
    assert.equal(answers()[3].status, 429);
    const bodySent = performance.now();
    socket.write(
      Buffer.concat([
        smallRequest.subarray(bodyAt),
        request(TOKENS.quiet, Buffer.from(JSON.stringify(after))),
      ]),
    );
    await waitUntil(
      () => answers().length === 5 && complete(),
      'the next answer',
      within(10_000),
      5,
    );
    assert.equal(answers()[4].status, 201);
    assert.ok(
      performance.now() - bodySent < within(REFUSED_BODY_HOLD_MS / 2),
      `answered in ${performance.now() - bodySent} ms`,
    );
    assert.equal((await ctx.db.usersByEmail(small.map((u) => u.email))).size, 0);
    assert.equal((await ctx.db.usersByEmail(after.map((u) => u.email))).size, 3);
    socket.destroy();
  });
});
