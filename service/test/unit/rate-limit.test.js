import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { parseNamedTokens } from '@sluice/env/named-tokens';
import { RateLimitedError } from '../../src/errors.js';
import { describeError } from '../../src/http/error-handler.js';
import { ClientDirectory, JWT_CLIENTS } from '../../src/http/client-directory.js';
import {
  ESTIMATED_USER_BYTES,
  TokenBucket,
  chargeRefused,
  limitRate,
  usersRead,
} from '../../src/http/rate-limit.js';
import { TokenSet } from '../../src/auth/token-set.js';

// An IETF httpapi RateLimit item: a quoted name and integer parameters.
const POLICY = /^"users";q=(\d+);w=(\d+)$/;
const STATE = /^"users";r=(\d+);t=(\d+)$/;

describe('rate limit: a token bucket in users a second, charged before the body (unit)', () => {
  test('a burst at once, then the rate; a request over the burst taken when the bucket is full, into debt', () => {
    const bucket = new TokenBucket({ rate: 100, burst: 200 }, 0);
    assert.equal(bucket.take(150, 0), 0);
    assert.equal(bucket.take(100, 0), 0.5, 'short by 50 users: half a second at 100 a second');
    assert.equal(bucket.take(100, 500), 0);
    assert.equal(bucket.take(1000, 500), 2, 'over the burst: waits for the whole burst');
    assert.equal(bucket.take(1000, 2500), 0, 'then taken whole');
    assert.ok(bucket.tokens < 0, 'in debt');
    assert.equal(bucket.take(1, 2500), (1 - bucket.tokens) / 100);
  });

  test('settled to the users the request held: fewer given back, more taken', () => {
    const bucket = new TokenBucket({ rate: 10, burst: 100 }, 0);
    bucket.take(80, 0);
    bucket.settle(-30);
    assert.equal(bucket.tokens, 50);
    bucket.settle(70);
    assert.equal(bucket.tokens, -20);
    bucket.settle(-500);
    assert.equal(bucket.tokens, 100, 'never more than the burst');
  });

  test('over any sequence of requests, users taken never exceed the burst plus the rate times the time', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 1, max: 10_000, noNaN: true }),
        fc.integer({ min: 1, max: 5000 }),
        fc.array(
          fc.record({
            gapMs: fc.integer({ min: 0, max: 2000 }),
            users: fc.integer({ min: 1, max: 20_000 }),
          }),
          { maxLength: 100 },
        ),
        (rate, burst, requests) => {
          const bucket = new TokenBucket({ rate, burst }, 0);
          let now = 0;
          let taken = 0;
          let lastTaken = 0;
          for (const { gapMs, users } of requests) {
            now += gapMs;
            if (bucket.take(users, now) === 0) {
              taken += users;
              lastTaken = users;
            }
          }
          // The last request taken may have gone into debt; everything before it fits the budget.
          return taken - lastTaken <= burst + (rate * now) / 1000 + 1e-6;
        },
      ),
    );
  });

  test('its RateLimit fields are the IETF syntax: the policy q (burst) w (its seconds), the state r (left) t (until full)', () => {
    const bucket = new TokenBucket({ rate: 1000, burst: 5000 }, 0);
    assert.deepEqual(POLICY.exec(bucket.policy)?.slice(1), ['5000', '5']);
    bucket.take(4500, 0);
    assert.deepEqual(STATE.exec(bucket.state(0))?.slice(1), ['500', '5']);
    assert.deepEqual(STATE.exec(bucket.state(5000))?.slice(1), ['5000', '0']);
  });
});

/** @param {Record<string, string>} headers @param {import('../../src/http/client-directory.js').Client} client */
function run(middleware, client, headers) {
  const req = /** @type {any} */ ({ headers, ingestClient: client });
  /** @type {Record<string, string>} */
  const set = {};
  /** @type {(() => void)[]} */
  const closing = [];
  const res = /** @type {any} */ ({
    locals: {},
    setHeader: (/** @type {string} */ k, /** @type {string} */ v) => (set[k] = v),
    once: (/** @type {string} */ event, /** @type {() => void} */ fn) =>
      event === 'close' && closing.push(fn),
  });
  /** @type {unknown[]} */
  const calls = [];
  middleware(req, res, (/** @type {unknown} */ err) => calls.push(err));
  const close = () => closing.splice(0).forEach((fn) => fn());
  return { res, set, err: calls[0], called: calls.length, close };
}

describe('limitRate: 429 before the body is read (unit)', () => {
  const tokens = {
    current: new TokenSet(
      parseNamedTokens(
        JSON.stringify({
          noisy: { token: 'tok-noisy', rate: 100, burst: 100 },
          quiet: 'tok-quiet',
        }),
      ),
    ),
  };
  let now = 0;
  const clients = new ClientDirectory({ tokens, now: () => now });
  /** @type {string[]} */
  const refused = [];
  const middleware = limitRate({ refused: (label) => refused.push(label), now: () => now });

  test('a client without a rate passes untouched; one with a rate is charged from Content-Length', () => {
    const quiet = run(middleware, clients.named('quiet'), { 'content-length': '1000000' });
    assert.equal(quiet.err, undefined);
    assert.deepEqual(quiet.set, {});
    const noisy = run(middleware, clients.named('noisy'), {
      'content-length': String(60 * ESTIMATED_USER_BYTES),
    });
    assert.equal(noisy.err, undefined);
    assert.match(noisy.set['RateLimit-Policy'], POLICY);
    assert.deepEqual(STATE.exec(noisy.set.RateLimit)?.slice(1), ['40', '1']);
    // The body held 30 users: 30 given back.
    noisy.res.locals.settleUsers(30);
    assert.equal(clients.named('noisy').bucket?.tokens, 70);
  });

  test('over its rate: a 429 rate_limited naming the client and its rate, Retry-After and both RateLimit fields, before any body', () => {
    const over = run(middleware, clients.named('noisy'), {
      'content-length': String(90 * ESTIMATED_USER_BYTES),
    });
    assert.ok(over.err instanceof RateLimitedError);
    assert.deepEqual(refused, ['noisy']);
    const { status, headers, body } = describeError(over.err);
    assert.equal(status, 429);
    assert.equal(body.error, 'rate_limited');
    assert.match(
      String(body.message),
      /"noisy" is over its rate of 100 users a second \(burst 100\)/,
    );
    assert.equal(headers['Retry-After'], '1');
    assert.match(headers['RateLimit-Policy'], POLICY);
    assert.deepEqual(STATE.exec(headers.RateLimit)?.slice(1), ['70', '1']);
    now += 1000;
    assert.equal(
      run(middleware, clients.named('noisy'), {
        'content-length': String(90 * ESTIMATED_USER_BYTES),
      }).err,
      undefined,
      'a second later it fits',
    );
  });

  test('a body without a length is let in while the bucket holds a user, and charged once read', () => {
    now += 10_000;
    const chunked = run(middleware, clients.named('noisy'), { 'transfer-encoding': 'chunked' });
    assert.equal(chunked.err, undefined);
    chunked.res.locals.settleUsers(500);
    assert.ok(
      run(middleware, clients.named('noisy'), { 'transfer-encoding': 'chunked' }).err instanceof
        RateLimitedError,
      'in debt: refused',
    );
  });

  test('a refusal after its body was read is charged what was read if more, never less, once', () => {
    const bucket = /** @type {import('../../src/http/rate-limit.js').TokenBucket} */ (
      clients.named('noisy').bucket
    );
    now += 10_000;
    // Without a length: charged one user, then a refused body of 2,000 bytes read: 20 users.
    const chunked = run(middleware, clients.named('noisy'), { 'transfer-encoding': 'chunked' });
    chunked.res.locals.bodyBytes = 2000;
    chargeRefused(chunked.res);
    assert.equal(bucket.tokens, 80);
    chargeRefused(chunked.res);
    assert.equal(bucket.tokens, 80, 'charged once');

    // An array parsed: its users if more than its bytes say.
    const array = run(middleware, clients.named('noisy'), { 'transfer-encoding': 'chunked' });
    Object.assign(array.res.locals, { bodyBytes: 300, bodyUsers: 30 });
    chargeRefused(array.res);
    assert.equal(bucket.tokens, 50);

    // Declared larger than what was read: the charge stands, nothing given back.
    const declared = run(middleware, clients.named('noisy'), {
      'content-length': String(40 * ESTIMATED_USER_BYTES),
    });
    declared.res.locals.bodyBytes = 5 * ESTIMATED_USER_BYTES;
    chargeRefused(declared.res);
    assert.equal(bucket.tokens, 10);
    assert.equal(usersRead({}), 0, 'nothing read: nothing more');
    assert.equal(usersRead({ bodyBytes: 1 }), 1);
  });
});

describe('client directory: limits declared with the token, read again with it (unit)', () => {
  test('a changed rate applies at once and keeps the bucket level; weights and caps come along; JWT clients share the defaults', () => {
    const holder = {
      current: new TokenSet(
        parseNamedTokens('{"a": {"token": "tok-a", "rate": 10, "burst": 10}, "b": "tok-b"}'),
      ),
    };
    const clients = new ClientDirectory({
      tokens: holder,
      jwtLimits: { rate: 5, weight: 2 },
      now: () => 0,
    });
    const a = clients.named('a');
    a.bucket?.take(8, 0);
    assert.equal(clients.named('a'), a, 'made once');
    holder.current = new TokenSet(
      parseNamedTokens(
        '{"a": {"token": "tok-a", "rate": 50, "burst": 100, "weight": 4}, "b": {"token": "tok-b", "maxInFlightBytes": 65536}}',
      ),
    );
    const again = clients.named('a');
    assert.notEqual(again, a);
    assert.equal(again.bucket?.rate, 50);
    assert.equal(again.bucket?.tokens, 2, 'the level carried over');
    assert.equal(again.weight, 4);
    assert.equal(clients.named('b').maxInFlightBytes, 65536);
    const jwt = clients.jwt('crm');
    assert.deepEqual([jwt.label, jwt.name, jwt.weight, jwt.bucket?.rate], ['jwt', 'crm', 2, 5]);
    assert.deepEqual(
      [clients.named('a').key, jwt.key],
      ['token:a', 'jwt:crm'],
      'keyed by scope: a token named jwt:crm is another client',
    );
    assert.notEqual(clients.jwt('other').bucket, jwt.bucket, 'each JWT client its own bucket');
  });

  test('a subject in debt keeps its debt through 10,000 new subjects; a request in flight keeps its bucket; memory bounded', () => {
    let now = 0;
    const clients = new ClientDirectory({ jwtLimits: { rate: 1, burst: 1 }, now: () => now });
    const middleware = limitRate({ refused: () => {}, now: () => now });
    const debtor = run(middleware, clients.jwt('debtor'), {
      'content-length': String(1000 * ESTIMATED_USER_BYTES),
    });
    debtor.res.locals.settleUsers(1000);
    debtor.close();
    // Its body without a length, charged one user, still being read: its settlement is to come.
    now += 1000;
    const streaming = run(middleware, clients.jwt('streaming'), { 'transfer-encoding': 'chunked' });
    assert.equal(streaming.err, undefined);
    now += 5000;
    for (let i = 0; i < JWT_CLIENTS; i++) {
      // Each throwaway subject sends `[]`: charged a user, settled to none, its bucket full again.
      const empty = run(middleware, clients.jwt(`throwaway-${i}`), { 'content-length': '2' });
      assert.equal(empty.err, undefined);
      empty.res.locals.settleUsers(0);
      empty.close();
      assert.ok(clients.jwtClients <= JWT_CLIENTS);
    }
    const again = run(middleware, clients.jwt('debtor'), { 'content-length': '2' });
    assert.ok(again.err instanceof RateLimitedError, 'still in debt: refused');
    assert.ok((clients.jwt('debtor').bucket?.tokens ?? 0) < -990, 'the debt kept');
    streaming.res.locals.settleUsers(500);
    streaming.close();
    assert.ok(
      run(middleware, clients.jwt('streaming'), { 'content-length': '2' }).err instanceof
        RateLimitedError,
      'settled on the bucket it still has',
    );
  });

  test('a directory full of subjects in debt: a new subject shares one overflow client, itself rate limited, and memory stays bounded', () => {
    let now = 0;
    const clients = new ClientDirectory({ jwtLimits: { rate: 1, burst: 1 }, now: () => now });
    for (let i = 0; i < JWT_CLIENTS; i++) clients.jwt(`debtor-${i}`).bucket?.take(100, now);
    const a = clients.jwt('new-a');
    const b = clients.jwt('new-b');
    assert.equal(a, b, 'one overflow client');
    assert.equal(a.label, 'jwt');
    assert.equal(clients.jwtClients, JWT_CLIENTS);
    assert.equal(a.bucket?.take(1, now), 0);
    assert.ok((b.bucket?.take(1, now) ?? 0) > 0, 'the overflow shares its bucket');
    now += 200_000;
    assert.notEqual(clients.jwt('new-c'), a, 'the debts paid off: room again');
    assert.equal(clients.jwtClients, 1);
  });

  test('limits are checked with the tokens: a problem names the client and the setting, never the token', () => {
    for (const [value, problem] of /** @type {[unknown, RegExp][]} */ ([
      [{ token: 'tok-secret', rate: 0 }, /"a" a rate that is not a number from/],
      [{ token: 'tok-secret', rate: 'fast' }, /"a" a rate that is not/],
      [{ token: 'tok-secret', burst: 10 }, /"a" a burst without a rate/],
      [
        { token: 'tok-secret', maxInFlightBytes: 1.5 },
        /"a" a maxInFlightBytes that is not a whole number/,
      ],
      [{ token: 'tok-secret', speed: 1 }, /"a" a setting "speed" that is not one/],
      [{ rate: 10 }, /"a" no token/],
    ])) {
      assert.throws(
        () => parseNamedTokens(JSON.stringify({ a: value })),
        (err) =>
          err instanceof TypeError &&
          problem.test(err.message) &&
          !err.message.includes('tok-secret'),
      );
    }
    assert.deepEqual(parseNamedTokens('{"a": {"token": "tok-a", "rate": 10}, "b": "tok-b"}'), [
      { name: 'a', token: 'tok-a', limits: { rate: 10 } },
      { name: 'b', token: 'tok-b' },
    ]);
  });
});
