import assert from 'node:assert/strict';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import zlib from 'node:zlib';
/* eslint n/no-unsupported-features/node-builtins: ["error", { allowExperimental: true,
   version: "^22.15.0 || >=23.8.0" }] -- zstd: the tests run on the Node of .nvmrc, which has it */
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { postHead, rawExchange } from '../../../test/support/raw-http.js';
import { makeUsers, uniqueTag } from '../../../test/support/users.js';

const TOKEN = 'test-ingest-token-0123456789';
const AUTH = `Bearer ${TOKEN}`;

// What a hostile or broken client can send around the users themselves: encodings, charsets, odd
// headers, duplicate keys, deep nesting, lying sizes, bodies that stall. Each is answered with its
// status and a message naming the problem, nothing is written, and the service goes on serving.
describe('hostile bodies and headers are refused cleanly, and nothing is written', () => {
  const ctx = useAppAndDatabase({
    INGEST_TOKEN: TOKEN,
    MAX_BODY_BYTES: String(2 * 1024 * 1024),
    BODY_READ_TIMEOUT_MS: '1500',
  });

  /**
   * Posts with fetch; checks status, error code, a message, and that the table did not change.
   * @param {unknown} body
   * @param {Record<string, string>} headers  besides the token
   * @param {number} status
   * @param {string} error
   * @param {RegExp} [message]
   */
  async function expectRefused(body, headers, status, error, message) {
    const before = await ctx.db.countUsers();
    const { 'content-type': contentType = 'application/json', ...rest } = headers;
    const res = await ctx.app.postUsers(body, { token: TOKEN, contentType, headers: rest });
    assert.equal(res.status, status, res.text);
    assert.equal(res.body?.error, error, res.text);
    assert.equal(typeof res.body?.message, 'string');
    if (message) assert.match(res.body.message, message);
    assert.equal(await ctx.db.countUsers(), before, 'nothing written');
    return res;
  }

  /**
   * Posts with fetch and checks that exactly these users were stored, as sent.
   * @param {unknown} body
   * @param {Record<string, string>} headers
   * @param {{ email: string, name: string }[]} users
   */
  async function expectStored(body, headers, users) {
    const { 'content-type': contentType = 'application/json', ...rest } = headers;
    const res = await ctx.app.postUsers(body, { token: TOKEN, contentType, headers: rest });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.inserted, users.length);
    const stored = await ctx.db.usersByEmail(users.map((u) => u.email));
    for (const u of users) assert.equal(stored.get(u.email)?.name, u.name, u.email);
  }

  /**
   * A raw exchange whose answer must be `status` (and `error`, when the service, not Node's parser,
   * answers), with the table unchanged.
   * @param {(socket: import('node:net').Socket) => Promise<void> | void} send
   * @param {number} status
   * @param {string | null} error  null: Node's HTTP parser answers, with no body
   */
  async function expectRawRefused(send, status, error) {
    const before = await ctx.db.countUsers();
    const res = await rawExchange(ctx.app.baseUrl, send);
    assert.equal(res.status, status, res.raw.slice(0, 500));
    if (error !== null) {
      assert.equal(res.body?.error, error, res.text);
      assert.equal(typeof res.body?.message, 'string');
    }
    assert.equal(await ctx.db.countUsers(), before, 'nothing written');
    return res;
  }

  const oneUser = () => makeUsers(1, uniqueTag());

  /**
   * `times` copies of `piece` through a compressor, never held decoded whole.
   * @param {import('node:stream').Transform} compressor @param {Buffer} piece @param {number} times
   */
  async function compressed(compressor, piece, times) {
    const out = compressor.toArray();
    for (let i = 0; i < times; i++) {
      if (!compressor.write(piece)) await once(compressor, 'drain');
    }
    compressor.end();
    return Buffer.concat(await out);
  }

  describe('charset and content type', () => {
    test('charset=utf-16: 415, saying UTF-8 is required', () =>
      expectRefused(
        Buffer.from(JSON.stringify(oneUser()), 'utf16le'),
        { 'content-type': 'application/json; charset=utf-16' },
        415,
        'unsupported_charset',
        /UTF-8/,
      ));
    test('charset=iso-8859-1: 415', () =>
      expectRefused(
        oneUser(),
        { 'content-type': 'application/json; charset=iso-8859-1' },
        415,
        'unsupported_charset',
        /UTF-8/,
      ));
    test('charset=UTF-8 (any case, quoted or not) is taken', async () => {
      const a = oneUser();
      const b = oneUser();
      await expectStored(a, { 'content-type': 'application/json; charset=UTF-8' }, a);
      await expectStored(b, { 'content-type': 'application/json; charset="utf-8"' }, b);
    });
    for (const header of [
      'application/json; charset',
      'application/json; charset=utf-8; charset=utf-16',
      'application/json, text/plain',
      'application/json; charset="utf-8',
    ]) {
      test(`a malformed or ambiguous Content-Type (${header}): 415`, () =>
        expectRefused(
          oneUser(),
          { 'content-type': header },
          415,
          'unsupported_media_type',
          /application\/json/,
        ));
    }
    test('a JSON-looking but other type (application/json-patch+json): 415', () =>
      expectRefused(
        oneUser(),
        { 'content-type': 'application/json-patch+json' },
        415,
        'unsupported_media_type',
      ));
    test('Content-Type given twice: 400, even when the first is right', () =>
      expectRawRefused(
        (s) => {
          const body = JSON.stringify(oneUser());
          s.write(
            postHead([
              ['Authorization', AUTH],
              ['Content-Type', 'application/json'],
              ['Content-Type', 'text/plain'],
              ['Content-Length', Buffer.byteLength(body)],
              ['Connection', 'close'],
            ]) + body,
          );
        },
        400,
        'duplicate_header',
      ));
  });

  describe('bytes that are not UTF-8 JSON as sent', () => {
    test('bytes that are not UTF-8 (a Latin-1 é): 400, not stored as U+FFFD', async () => {
      const [user] = oneUser();
      const body = Buffer.from(JSON.stringify([{ ...user, name: 'Ren\u00e9' }]), 'latin1');
      await expectRefused(body, {}, 400, 'invalid_utf8');
    });
    test('a surrogate encoded in UTF-8 bytes (CESU-8 style ED A0 80): 400', async () => {
      const [user] = oneUser();
      const [head, tail] = JSON.stringify([{ ...user, name: 'a@@@b' }]).split('@@@');
      const body = Buffer.concat([
        Buffer.from(head),
        Buffer.from([0xed, 0xa0, 0x80]),
        Buffer.from(tail),
      ]);
      await expectRefused(body, {}, 400, 'invalid_utf8');
    });
    test('a UTF-8 byte-order mark is ignored (RFC 8259 allows it) and the users are stored as sent', async () => {
      const users = oneUser();
      await expectStored(
        Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(users))]),
        {},
        users,
      );
    });
  });

  describe('duplicate keys (JSON.parse would keep the last one silently)', () => {
    test('email given twice in one user: 400 naming the item and the field', async () => {
      const res = await expectRefused(
        '[{"email": "first@example.com", "name": "A", "email": "second@example.com"}]',
        {},
        400,
        'invalid_batch',
      );
      assert.deepEqual(
        res.body.errors.map((/** @type {any} */ e) => [e.index, e.field]),
        [[0, 'email']],
      );
      assert.match(res.body.errors[0].message, /more than once/);
    });
    test('a key spelled with an escape ("n\\u0061me") is the same key', async () => {
      const [a, b] = makeUsers(3).map((u) => JSON.stringify(u));
      const res = await expectRefused(
        `[${a}, ${b.slice(0, -1)}, "n\\u0061me": "Mallory"}]`,
        {},
        400,
        'invalid_batch',
      );
      assert.deepEqual(
        res.body.errors.map((/** @type {any} */ e) => [e.index, e.field]),
        [[1, 'name']],
      );
    });
    test('a duplicate inside a nested value, or in an object body, is refused too', async () => {
      await expectRefused(
        '[{"email": "n@example.com", "name": {"x": 1, "x": 2}}]',
        {},
        400,
        'invalid_batch',
      );
      await expectRefused(
        '{"email": "o@example.com", "email": "p@example.com"}',
        {},
        400,
        'duplicate_key',
        /"email"/,
      );
    });
    test('a string that looks like keys ("\\"a\\": 1, \\"a\\": 2") is no duplicate', async () => {
      const email = `looks-${uniqueTag()}@example.com`;
      await expectStored(`[{"email": "${email}", "name": "\\"a\\": 1, \\"a\\": 2 \\\\"}]`, {}, [
        { email, name: '"a": 1, "a": 2 \\' },
      ]);
    });
  });

  describe('nesting', () => {
    test('an array nested 500,000 deep: 400, no crash', async () => {
      const depth = 500_000;
      await expectRefused(`${'['.repeat(depth)}${']'.repeat(depth)}`, {}, 400, 'invalid_batch');
    });
    test('a name that is an object nested 200,000 deep: 400 naming name', async () => {
      const depth = 200_000;
      const res = await expectRefused(
        `[{"email": "deep@example.com", "name": ${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}}]`,
        {},
        400,
        'invalid_batch',
      );
      assert.deepEqual(
        res.body.errors.map((/** @type {any} */ e) => e.field),
        ['name'],
      );
    });
  });

  describe('Content-Encoding', () => {
    test('gzip, deflate, br and zstd are taken; the users are stored as sent', async () => {
      for (const [coding, compress] of /** @type {const} */ ([
        ['gzip', zlib.gzipSync],
        ['deflate', zlib.deflateSync],
        ['br', zlib.brotliCompressSync],
        ['zstd', zlib.zstdCompressSync],
      ])) {
        const users = makeUsers(3, uniqueTag());
        await expectStored(compress(JSON.stringify(users)), { 'content-encoding': coding }, users);
      }
    });
    test('an unknown encoding: 415 naming it and what is taken', () =>
      expectRefused(
        JSON.stringify(oneUser()),
        { 'content-encoding': 'compress' },
        415,
        'unsupported_encoding',
        /compress is not supported; send one of gzip, deflate, br, zstd/,
      ));
    test('stacked encodings (gzip, gzip): 415', () =>
      expectRefused(
        zlib.gzipSync(zlib.gzipSync(JSON.stringify(oneUser()))),
        { 'content-encoding': 'gzip, gzip' },
        415,
        'unsupported_encoding',
        /stacks/,
      ));
    test('a body that is not gzip although it says so: 400', () =>
      expectRefused(
        JSON.stringify(oneUser()),
        { 'content-encoding': 'gzip' },
        400,
        'malformed_encoding',
      ));
    test('truncated gzip: 400', () =>
      expectRefused(
        zlib.gzipSync(JSON.stringify(makeUsers(50))).subarray(0, 200),
        { 'content-encoding': 'gzip' },
        400,
        'malformed_encoding',
      ));
    test('a gzip bomb (1 MB that inflates to 1 GiB) stops at MAX_BODY_BYTES decoded: 413', async () => {
      const member = zlib.gzipSync(Buffer.alloc(1024 * 1024, 0x20), { level: 9 });
      const bomb = Buffer.concat(Array.from({ length: 1024 }, () => member));
      assert.ok(bomb.length < 2 * 1024 * 1024);
      await expectRefused(
        bomb,
        { 'content-encoding': 'gzip' },
        413,
        'payload_too_large',
        /MAX_BODY_BYTES/,
      );
    });
    for (const [coding, compressor] of /** @type {const} */ ([
      [
        'br',
        () => zlib.createBrotliCompress({ params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 1 } }),
      ],
      ['zstd', () => zlib.createZstdCompress()],
    ])) {
      test(`a ${coding} bomb (1 GiB of spaces) stops at MAX_BODY_BYTES decoded: 413, memory bounded`, async () => {
        const bomb = await compressed(compressor(), Buffer.alloc(1024 * 1024, 0x20), 1024);
        assert.ok(bomb.length < 2 * 1024 * 1024);
        const rssBefore = process.memoryUsage.rss();
        const logsBefore = ctx.app.logs.length;
        const started = performance.now();
        await expectRefused(
          bomb,
          { 'content-encoding': coding },
          413,
          'payload_too_large',
          /MAX_BODY_BYTES/,
        );
        assert.ok(performance.now() - started < 5000, 'refused within 5 s');
        const grownMiB = (process.memoryUsage.rss() - rssBefore) / 2 ** 20;
        assert.ok(grownMiB < 64, `RSS grew ${grownMiB.toFixed(0)} MiB`);
        const logged = ctx.app.logs.slice(logsBefore);
        assert.ok(
          logged.some((l) => l.res?.statusCode === 413),
          'the refusal is logged, as a warning',
        );
        assert.ok(!JSON.stringify(logged).includes(TOKEN), 'no token in the log');
        assert.deepEqual(
          logged.filter((l) => l.level >= 50),
          [],
        );
      });
    }
  });

  describe('Authorization', () => {
    test('the scheme in any case, with extra spaces, is taken (RFC 9110)', async () => {
      const a = oneUser();
      const b = oneUser();
      const post = (/** @type {unknown} */ users, /** @type {string} */ authorization) =>
        fetch(`${ctx.app.baseUrl}/users`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization },
          body: JSON.stringify(users),
        });
      assert.equal((await post(a, `bearer ${TOKEN}`)).status, 201);
      assert.equal((await post(b, `Bearer   ${TOKEN}`)).status, 201);
    });
    for (const [what, authorization, code] of [
      ['Basic', `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}`, 'invalid_request'],
      ['a bare token', TOKEN, 'invalid_request'],
      ['Bearer and nothing', 'Bearer', 'invalid_request'],
      ['Bearer and spaces', 'Bearer   ', 'invalid_request'],
      ['the token and more', `Bearer ${TOKEN} extra`, 'invalid_token'],
    ]) {
      test(`${what}: 401, WWW-Authenticate's error ${code}`, async () => {
        const before = await ctx.db.countUsers();
        const res = await fetch(`${ctx.app.baseUrl}/users`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization },
          body: JSON.stringify(oneUser()),
        });
        assert.equal(res.status, 401);
        assert.equal((await res.json()).error, 'unauthorized');
        assert.equal(res.headers.get('www-authenticate'), `Bearer error="${code}"`);
        assert.equal(await ctx.db.countUsers(), before);
      });
    }
    test('Authorization given twice: 400, even when the first is right', () =>
      expectRawRefused(
        (s) => {
          const body = JSON.stringify(oneUser());
          s.write(
            postHead([
              ['Authorization', AUTH],
              ['Authorization', 'Bearer other'],
              ['Content-Type', 'application/json'],
              ['Content-Length', Buffer.byteLength(body)],
              ['Connection', 'close'],
            ]) + body,
          );
        },
        400,
        'duplicate_header',
      ));
  });

  describe('sizes and framing that lie', () => {
    test('a Content-Length over MAX_BODY_BYTES: 413 before the body is sent, and the connection closes', async () => {
      const res = await expectRawRefused(
        (s) => {
          s.write(
            postHead([
              ['Authorization', AUTH],
              ['Content-Type', 'application/json'],
              ['Content-Length', 50 * 1024 * 1024],
            ]),
          );
        },
        413,
        'payload_too_large',
      );
      assert.match(res.body.message, /Content-Length/);
      assert.equal(res.headers.connection, 'close');
    });
    test('a chunked body that grows past MAX_BODY_BYTES: 413', () =>
      expectRawRefused(
        async (s) => {
          s.write(
            postHead([
              ['Authorization', AUTH],
              ['Content-Type', 'application/json'],
              ['Transfer-Encoding', 'chunked'],
            ]),
          );
          const chunk = Buffer.alloc(256 * 1024, 0x20);
          for (let i = 0; i < 12 && !s.destroyed; i++) {
            s.write(`${chunk.length.toString(16)}\r\n`);
            s.write(chunk);
            s.write('\r\n');
            await sleep(5);
          }
        },
        413,
        'payload_too_large',
      ));
    // The JSON is cut at Content-Length (malformed) and the bytes after it are a malformed second
    // request, which Node's parser answers 400 at once, in place of the first answer.
    test('a Content-Length shorter than the body: 400', () =>
      expectRawRefused(
        (s) => {
          const body = JSON.stringify(oneUser());
          s.write(
            postHead([
              ['Authorization', AUTH],
              ['Content-Type', 'application/json'],
              ['Content-Length', body.length - 5],
              ['Connection', 'close'],
            ]) + body,
          );
        },
        400,
        null,
      ));
    test('Content-Length and Transfer-Encoding together: 400 from the HTTP parser', () =>
      expectRawRefused(
        (s) => {
          const body = JSON.stringify(oneUser());
          s.write(
            `${postHead([
              ['Authorization', AUTH],
              ['Content-Type', 'application/json'],
              ['Content-Length', body.length],
              ['Transfer-Encoding', 'chunked'],
            ])}${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
          );
        },
        400,
        null,
      ));
    test('Transfer-Encoding: gzip, chunked (a transfer coding Node would not decode): 501', () =>
      expectRawRefused(
        (s) => {
          const body = zlib.gzipSync(JSON.stringify(oneUser()));
          s.write(
            postHead([
              ['Authorization', AUTH],
              ['Content-Type', 'application/json'],
              ['Transfer-Encoding', 'gzip, chunked'],
              ['Connection', 'close'],
            ]),
          );
          s.write(`${body.length.toString(16)}\r\n`);
          s.write(body);
          s.write('\r\n0\r\n\r\n');
        },
        501,
        'unsupported_transfer_encoding',
      ));
    test('two different Content-Lengths: 400 from the HTTP parser', () =>
      expectRawRefused(
        (s) => {
          const body = JSON.stringify(oneUser());
          s.write(
            postHead([
              ['Authorization', AUTH],
              ['Content-Type', 'application/json'],
              ['Content-Length', body.length],
              ['Content-Length', body.length + 10],
            ]) + body,
          );
        },
        400,
        null,
      ));
  });

  describe('slow clients (BODY_READ_TIMEOUT_MS=1500 here)', () => {
    test('a body that stalls half way: 408 naming BODY_READ_TIMEOUT_MS, and the connection closes', async () => {
      const res = await expectRawRefused(
        (s) => {
          const body = JSON.stringify(oneUser());
          s.write(
            postHead([
              ['Authorization', AUTH],
              ['Content-Type', 'application/json'],
              ['Content-Length', body.length],
            ]) + body.slice(0, 20),
          );
        },
        408,
        'body_timeout',
      );
      assert.match(res.body.message, /BODY_READ_TIMEOUT_MS/);
      assert.equal(res.headers.connection, 'close');
    });
    test('a body that trickles a byte at a time, never idle for long: 408 all the same', () =>
      expectRawRefused(
        async (s) => {
          const body = JSON.stringify(oneUser());
          s.write(
            postHead([
              ['Authorization', AUTH],
              ['Content-Type', 'application/json'],
              ['Content-Length', body.length],
            ]),
          );
          for (let i = 0; i < body.length && !s.destroyed && s.readyState === 'open'; i++) {
            s.write(body[i]);
            await sleep(100);
            if (s.bytesRead > 0) break; // answered
          }
        },
        408,
        'body_timeout',
      ));
    test('a gzip body that stalls: 408', () =>
      expectRawRefused(
        (s) => {
          const body = zlib.gzipSync(JSON.stringify(makeUsers(200)));
          s.write(
            postHead([
              ['Authorization', AUTH],
              ['Content-Type', 'application/json'],
              ['Content-Encoding', 'gzip'],
              ['Content-Length', body.length],
            ]),
          );
          s.write(body.subarray(0, 100));
        },
        408,
        'body_timeout',
      ));
  });

  test('after all of it the service still serves and stores', async () => {
    const users = makeUsers(3, uniqueTag());
    await expectStored(users, {}, users);
  });
});
