import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import zlib from 'node:zlib';
/* eslint n/no-unsupported-features/node-builtins: ["error", { allowExperimental: true,
   version: "^22.15.0 || >=23.8.0" }] -- zstd: the tests run on the Node of .nvmrc, which has it */
import { InvalidBatchError } from '../../src/errors.js';
import { checkJsonHeaders, parseJsonBody } from '../../src/http/json-body.js';
import { repeatedHeaders } from '../../src/http/repeated-headers.js';

describe('parseJsonBody (unit)', () => {
  test('a UTF-8 BOM is dropped, nothing else is', () => {
    assert.deepEqual(parseJsonBody(Buffer.from('\ufeff["\ufeffx"]')), ['\ufeffx']);
  });
  test('an empty body is undefined; bad UTF-8, bad JSON and duplicate keys throw with their codes', () => {
    assert.equal(parseJsonBody(Buffer.alloc(0)), undefined);
    assert.throws(() => parseJsonBody(Buffer.from([0x5b, 0x22, 0xff, 0x22, 0x5d])), {
      code: 'invalid_utf8',
      status: 400,
    });
    assert.throws(() => parseJsonBody(Buffer.from('[{')), { code: 'malformed_json', status: 400 });
    assert.throws(
      () => parseJsonBody(Buffer.from('[{"a": 1, "a": 2}]')),
      (/** @type {any} */ err) => err instanceof InvalidBatchError && err.errors[0].field === 'a',
    );
    assert.throws(() => parseJsonBody(Buffer.from('{"a": 1, "a": 2}')), {
      code: 'duplicate_key',
      status: 400,
    });
  });
  test('duplicate keys in a batch are named per user, with the count of users in the message', () => {
    assert.throws(
      () =>
        parseJsonBody(
          Buffer.from(
            '[{"email": "a@x.io", "email": "b@x.io"}, {"name": "x"}, {"name": 1, "name": 2, "phone": 3, "phone": 4}]',
          ),
        ),
      (/** @type {any} */ err) => {
        assert.ok(err instanceof InvalidBatchError);
        assert.deepEqual(
          err.errors.map((/** @type {any} */ e) => [e.index, e.field]),
          [
            [0, 'email'],
            [2, 'name'],
            [2, 'phone'],
          ],
        );
        assert.match(err.message, /^2 of the users have a field given twice/);
        return true;
      },
    );
  });
  test('a lone surrogate written as an escape is valid UTF-8 and valid JSON: it is parsed, the schema refuses it', () => {
    assert.deepEqual(parseJsonBody(Buffer.from('["\\ud800"]')), ['\ud800']);
  });
});

/**
 * The parts of a request checkJsonHeaders reads. Each [name, value] pair is one header line.
 * @param {[string, string][]} lines
 */
function request(lines) {
  /** @type {Record<string, string>} */
  const headers = {};
  for (const [name, value] of lines) headers[name.toLowerCase()] ??= value;
  return /** @type {import('node:http').IncomingMessage} */ (
    /** @type {unknown} */ ({ headers, rawHeaders: lines.flat() })
  );
}
const JSON_TYPE = /** @type {[string, string]} */ (['Content-Type', 'application/json']);
const MAX = 1000;

/** @param {[string, string][]} lines @param {number} status @param {string} code @param {RegExp} [message] */
function assertRefused(lines, status, code, message) {
  const checked = checkJsonHeaders(request(lines), MAX);
  assert.ok('error' in checked, `${JSON.stringify(lines)} was accepted`);
  assert.equal(checked.error.status, status);
  assert.equal(checked.error.code, code);
  if (message) assert.match(checked.error.message, message);
}

describe('checkJsonHeaders (unit)', () => {
  test('application/json, in any case, with charset utf-8 or utf8 or none: no decoder for an identity body', () => {
    for (const type of [
      'application/json',
      'Application/JSON',
      'application/json; charset=utf-8',
      'application/json; charset="UTF8"',
    ]) {
      assert.deepEqual(
        checkJsonHeaders(request([['Content-Type', type]]), MAX),
        { decoder: null },
        type,
      );
    }
    assert.deepEqual(
      checkJsonHeaders(request([JSON_TYPE, ['Content-Encoding', 'identity']]), MAX),
      { decoder: null },
    );
  });

  test('gzip, x-gzip, deflate, br and zstd bodies get a decoder that inflates them', async () => {
    for (const [coding, compress] of /** @type {const} */ ([
      ['gzip', zlib.gzipSync],
      ['X-GZIP', zlib.gzipSync],
      ['deflate', zlib.deflateSync],
      ['br', zlib.brotliCompressSync],
      ['Zstd', zlib.zstdCompressSync],
    ])) {
      const checked = checkJsonHeaders(request([JSON_TYPE, ['Content-Encoding', coding]]), MAX);
      assert.ok('decoder' in checked && checked.decoder, coding);
      const decoder = checked.decoder();
      decoder.end(compress('[1]'));
      assert.equal(Buffer.concat(await decoder.toArray()).toString(), '[1]', coding);
    }
  });

  test('a zstd frame that asks for a window over 8 MiB (RFC 9659) fails before it is allocated', async () => {
    const checked = checkJsonHeaders(request([JSON_TYPE, ['Content-Encoding', 'zstd']]), MAX);
    assert.ok('decoder' in checked && checked.decoder);
    // A frame header declaring a 128 MiB window (log 27), then one RLE block of 1 KiB of spaces.
    const frame = Buffer.from([
      0x28,
      0xb5,
      0x2f,
      0xfd,
      0x00,
      (27 - 10) << 3,
      0x03,
      0x20,
      0x00,
      0x20,
    ]);
    const decoder = checked.decoder();
    decoder.end(frame);
    await assert.rejects(decoder.toArray(), { code: 'ZSTD_error_frameParameter_windowTooLarge' });
    const within = checked.decoder();
    within.end(Buffer.from([...frame.subarray(0, 5), (23 - 10) << 3, ...frame.subarray(6)]));
    assert.equal(Buffer.concat(await within.toArray()).toString(), ' '.repeat(1024));
  });

  test('a missing, malformed or other Content-Type is 415, each with its own message', () => {
    assertRefused([], 415, 'unsupported_media_type', /missing/);
    assertRefused(
      [['Content-Type', 'application/json; charset']],
      415,
      'unsupported_media_type',
      /malformed/,
    );
    assertRefused(
      [['Content-Type', 'text/json']],
      415,
      'unsupported_media_type',
      /must be application\/json/,
    );
    assertRefused(
      [['Content-Type', 'application/json; charset=latin1']],
      415,
      'unsupported_charset',
      /latin1/,
    );
  });

  test('a Content-Type given twice is 400, even when both say the same', () => {
    assertRefused([JSON_TYPE, JSON_TYPE], 400, 'duplicate_header');
  });

  test('a transfer coding other than chunked is 501; stacked or unknown content codings are 415', () => {
    assertRefused(
      [JSON_TYPE, ['Transfer-Encoding', 'gzip, chunked']],
      501,
      'unsupported_transfer_encoding',
      /gzip/,
    );
    assertRefused(
      [JSON_TYPE, ['Content-Encoding', 'gzip, deflate']],
      415,
      'unsupported_encoding',
      /stacks/,
    );
    assertRefused(
      [JSON_TYPE, ['Content-Encoding', 'compress']],
      415,
      'unsupported_encoding',
      /compress is not supported; send one of gzip, deflate, br, zstd, or none/,
    );
    assertRefused(
      [JSON_TYPE, ['Content-Encoding', 'br, zstd']],
      415,
      'unsupported_encoding',
      /br, zstd stacks encodings/,
    );
    assert.deepEqual(
      checkJsonHeaders(request([JSON_TYPE, ['Transfer-Encoding', 'Chunked']]), MAX),
      { decoder: null },
    );
  });

  test('a Content-Length over the limit is 413 before a byte is read, compressed or not; at the limit it passes', () => {
    assertRefused(
      [JSON_TYPE, ['Content-Length', String(MAX + 1)]],
      413,
      'payload_too_large',
      /1001 is over MAX_BODY_BYTES \(1000\)/,
    );
    assertRefused(
      [JSON_TYPE, ['Content-Encoding', 'gzip'], ['Content-Length', String(MAX + 1)]],
      413,
      'payload_too_large',
    );
    assert.deepEqual(checkJsonHeaders(request([JSON_TYPE, ['Content-Length', String(MAX)]]), MAX), {
      decoder: null,
    });
  });
});

describe('repeatedHeaders (unit)', () => {
  test('names the watched headers given more than once, whatever their case, each once', () => {
    const req = request([
      ['Authorization', 'a'],
      ['content-type', 'x'],
      ['X-Other', '1'],
      ['X-Other', '2'],
      ['AUTHORIZATION', 'b'],
      ['authorization', 'c'],
    ]);
    assert.deepEqual(repeatedHeaders(req, ['content-type', 'authorization']), ['authorization']);
    assert.deepEqual(repeatedHeaders(req, ['content-type']), []);
  });
});
