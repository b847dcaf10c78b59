import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import { describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { waitUntil } from '../../../test/support/wait.js';
import { makeUsers } from '../../../test/support/users.js';
import { within } from '../../../test/support/time-factor.js';
import { HOLD_ABOVE_BYTES, REFUSED_BODY_HOLD_MS } from '../../src/http/unread-body.js';

// A 64 KiB budget: 61,440 bytes for large bodies. Three bodies of about 18 KiB fill it; a fourth waits.
const TOKENS = {
  noisy: 'tok-fair-noisy',
  quiet: 'tok-fair-quiet',
  limited: 'tok-fair-limited',
  chunky: 'tok-fair-chunky',
  streamer: 'tok-fair-streamer',
  pushy: 'tok-fair-pushy',
  sender: 'tok-fair-sender',
};
const ENV = {
  ADMISSION_BUDGET_BYTES: String(64 * 1024),
  ADMISSION_WAIT_MS: '20000',
  LOG_LEVEL: 'warn',
  INGEST_TOKENS: JSON.stringify({
    noisy: TOKENS.noisy,
    quiet: TOKENS.quiet,
    limited: { token: TOKENS.limited, rate: 50, burst: 50 },
    chunky: { token: TOKENS.chunky, rate: 10, burst: 10 },
    streamer: { token: TOKENS.streamer, rate: 10, burst: 10 },
    pushy: { token: TOKENS.pushy, rate: 10, burst: 10 },
    sender: { token: TOKENS.sender, rate: 10, burst: 10 },
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

/**
 * A POST /users whose body goes chunked (no Content-Length), answered once sent.
 * @param {string} baseUrl @param {string} token @param {string} contentType @param {string} text
 * @returns {Promise<{ status: number, headers: http.IncomingHttpHeaders, body: any }>}
 */
function postChunked(baseUrl, token, contentType, text) {
  return new Promise((resolve, reject) => {
    const req = http.request(`${baseUrl}/users`, {
      method: 'POST',
      agent: false,
      headers: { 'content-type': contentType, authorization: `Bearer ${token}` },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      let body = '';
      res
        .setEncoding('utf8')
        .on('data', (c) => (body += c))
        .on('end', () =>
          resolve({
            status: /** @type {number} */ (res.statusCode),
            headers: res.headers,
            body: JSON.parse(body),
          }),
        );
    });
    // In pieces, so that it goes chunked however Node would frame a single write.
    for (let at = 0; at < text.length; at += 16 * 1024) req.write(text.slice(at, at + 16 * 1024));
    req.end();
  });
}

/**
 * A kept-alive connection written to by hand: `request` frames a POST /users (a body without a
 * length is sent as one chunk), `answers` are those read so far, `complete` when each has its body.
 * @param {string} baseUrl
 */
async function keptConnection(baseUrl) {
  const socket = net.connect(Number(new URL(baseUrl).port), '127.0.0.1');
  await once(socket, 'connect');
  let text = '';
  socket.setEncoding('latin1').on('data', (chunk) => (text += chunk));
  /** @param {string} token @param {Buffer} body @param {{ chunked?: boolean }} [options] */
  const request = (token, body, { chunked = false } = {}) =>
    Buffer.concat([
      Buffer.from(
        `POST /users HTTP/1.1\r\nHost: sluice\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n${chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${body.length}`}\r\n\r\n`,
      ),
      ...(chunked
        ? [Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n0\r\n\r\n')]
        : [body]),
    ]);
  /** The answers read so far, each status and body. */
  const answers = () =>
    text
      .split('HTTP/1.1 ')
      .slice(1)
      .map((a) => ({ status: Number(a.slice(0, 3)), body: a.slice(a.indexOf('\r\n\r\n') + 4) }));
  const complete = () => answers().every((a) => a.body.endsWith('}'));
  return { socket, request, answers, complete };
}

/** Refused bodies held unread now. */
const HELD = 'sluice_refused_bodies_held';

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
    // Into debt: 200 users taken at once from a bucket of 10, so that what follows is refused
    // however slow the machine.
    assert.equal((await ctx.app.postUsers(makeUsers(200), { token: TOKENS.sender })).status, 201);
    const { socket, request, answers, complete } = await keptConnection(ctx.app.baseUrl);
    // More than the kernel's buffers on both sides hold: the write ends only once the service reads.
    const filler = Buffer.alloc(8 * 1024 * 1024, 0x20);
    const sent = performance.now();
    let writtenAt = 0;
    socket.write(request(TOKENS.sender, filler), () => (writtenAt = performance.now()));
    await waitUntil(() => answers().length === 1 && complete(), 'the 429', within(10_000), 5);
    const answeredAt = performance.now();
    assert.equal(answers()[0].status, 429);
    assert.equal(JSON.parse(answers()[0].body).error, 'rate_limited');
    assert.ok(
      answeredAt - sent < within(1000),
      `answered in ${answeredAt - sent} ms, before its body was read`,
    );
    assert.equal(writtenAt, 0, 'the body not yet read');
    assert.equal(await metricValue(ctx.app.baseUrl, HELD), 1);

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

    // A small body (as large as one is: HOLD_ABOVE_BYTES) is read at once, not held: the next
    // request on the connection is not kept waiting.
    const [small, after] = [makeUsers(200), makeUsers(3)];
    const smallBody = Buffer.from(JSON.stringify(small).padEnd(HOLD_ABOVE_BYTES, ' '));
    assert.equal(smallBody.length, HOLD_ABOVE_BYTES);
    const smallRequest = request(TOKENS.sender, smallBody);
    const bodyAt = smallRequest.length - smallBody.length;
    socket.write(smallRequest.subarray(0, bodyAt));
    await waitUntil(
      () => answers().length === 3 && complete(),
      'the 429 before its small body',
      within(10_000),
      5,
    );
    assert.equal(answers()[2].status, 429);
    // Holding it would not slow its sender (it fits in the request's buffer): only the count shows it.
    assert.equal(await metricValue(ctx.app.baseUrl, HELD), 0, 'not held');
    const bodySent = performance.now();
    socket.write(
      Buffer.concat([
        smallRequest.subarray(bodyAt),
        request(TOKENS.quiet, Buffer.from(JSON.stringify(after))),
      ]),
    );
    await waitUntil(
      () => answers().length === 4 && complete(),
      'the next answer',
      within(10_000),
      5,
    );
    assert.equal(answers()[3].status, 201);
    assert.ok(
      performance.now() - bodySent < within(REFUSED_BODY_HOLD_MS / 2),
      `answered in ${performance.now() - bodySent} ms`,
    );
    assert.equal((await ctx.db.usersByEmail(small.map((u) => u.email))).size, 0);
    assert.equal((await ctx.db.usersByEmail(after.map((u) => u.email))).size, 3);
    socket.destroy();
  });

  test('a body without a length sent on after a 429 is held as a large one is, then read; the connection kept', async () => {
    // Into debt: 200 users taken at once from a bucket of 10 (a request over the burst).
    assert.equal((await ctx.app.postUsers(makeUsers(200), { token: TOKENS.pushy })).status, 201);
    const { socket, request, answers, complete } = await keptConnection(ctx.app.baseUrl);
    const filler = Buffer.alloc(8 * 1024 * 1024, 0x20);
    const sent = performance.now();
    let writtenAt = 0;
    socket.write(request(TOKENS.pushy, filler, { chunked: true }), () => {
      writtenAt = performance.now();
    });
    await waitUntil(() => answers().length === 1 && complete(), 'the 429', within(10_000), 5);
    const answeredAt = performance.now();
    assert.equal(answers()[0].status, 429);
    assert.ok(answeredAt - sent < within(1000), `answered in ${answeredAt - sent} ms`);
    assert.equal(writtenAt, 0, 'the body not yet read');
    assert.equal(await metricValue(ctx.app.baseUrl, HELD), 1);
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
    socket.destroy();
  });

  test('a body without a length refused once read (400) is charged the users it held: the client waits it out; nothing written, no token logged', async () => {
    const { baseUrl } = ctx.app;
    // Every user invalid: the array is read whole, parsed and checked, then refused.
    const invalid = makeUsers(500).map((u) => ({ ...u, email: `not an email ${u.email}` }));
    const started = performance.now();
    const refused = await postChunked(
      baseUrl,
      TOKENS.chunky,
      'application/json',
      JSON.stringify(invalid),
    );
    assert.equal(refused.status, 400, JSON.stringify(refused.body).slice(0, 300));
    assert.ok(performance.now() - started < within(5000));
    await assertInDebt(TOKENS.chunky, 500, invalid);
  });

  test('a stream (NDJSON) without a length refused midway is charged the bytes it had read: the client waits it out; nothing written', async () => {
    const users = makeUsers(600);
    const lines = users.map((u) => JSON.stringify(u));
    lines.splice(300, 0, '{not json');
    const refused = await postChunked(
      ctx.app.baseUrl,
      TOKENS.streamer,
      'application/x-ndjson',
      `${lines.join('\n')}\n`,
    );
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error, 'malformed_json');
    // Its first 300 lines read, 100 bytes a user: more than 300 users.
    const read = Buffer.byteLength(lines.slice(0, 300).join('\n'));
    await assertInDebt(TOKENS.streamer, Math.floor(read / 100), users);
  });

  /**
   * The client of `token` (rate 10, burst 10) owes at least `owed` users: its next request is
   * refused with the wait that says so; none of `sent` written; its token nowhere in the log.
   * @param {string} token @param {number} owed @param {{ email: string }[]} sent
   */
  async function assertInDebt(token, owed, sent) {
    const next = makeUsers(1);
    const after = await ctx.app.postUsers(next, { token });
    assert.equal(after.status, 429);
    const wait = Number(after.headers.get('retry-after'));
    assert.ok(wait >= Math.floor((owed - 10) / 10), `Retry-After ${wait} s for ${owed} users`);
    assert.match(String(after.headers.get('ratelimit')), /^"users";r=0;t=\d+$/);
    const emails = [...sent, ...next].map((u) => u.email);
    assert.equal((await ctx.db.usersByEmail(emails)).size, 0);
    assert.ok(!JSON.stringify(ctx.app.logs).includes(token), 'the token is never logged');
  }
});
