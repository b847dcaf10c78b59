import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidBatchError } from '../../src/errors.js';
import { parseJsonBody } from '../../src/http/json-body.js';
import { findDuplicateKeys } from '../../src/http/json-keys.js';
import { parseMediaType } from '../../src/http/media-type.js';

/** @param {string} text */
const duplicates = (text) => findDuplicateKeys(text, JSON.parse(text));

describe('findDuplicateKeys (unit)', () => {
  test('none in ordinary batches, whatever the strings hold', () => {
    assert.deepEqual(duplicates('[{"a": "x", "b": "y"}, {"a": "x", "b": "y"}]'), []);
    assert.deepEqual(duplicates('[{"a": "\\"a\\": 1, \\"a\\": 2", "b": "\\\\", "c": ":\\\\\\"a\\":"}]'), []);
    assert.deepEqual(duplicates('{"a": {"a": {"a": [{"a": 1}]}}}'), []);
    assert.deepEqual(duplicates('[]'), []);
    assert.deepEqual(duplicates('"just a string with \\"a\\": 1"'), []);
  });

  test('each duplicate with the index of its item, in text order', () => {
    assert.deepEqual(duplicates('[{"a": 1}, {"a": 1, "b": 2, "a": 3}, {"c": 1, "c" : 2}]'), [
      { index: 1, key: 'a' },
      { index: 2, key: 'c' },
    ]);
  });

  test('a key written with escapes is the same key; whitespace around the colon does not hide one', () => {
    assert.deepEqual(duplicates('[{"email": 1, "em\\u0061il"\n\t :2}]'), [{ index: 0, key: 'email' }]);
  });

  test('nested and top-level objects: found, with the item index or null', () => {
    assert.deepEqual(duplicates('[{"n": {"x": 1, "x": 2}}]'), [{ index: 0, key: 'x' }]);
    assert.deepEqual(duplicates('{"k": 1, "k": 2}'), [{ index: null, key: 'k' }]);
  });

  test('a duplicate hidden inside a value that was itself overwritten still counts', () => {
    assert.deepEqual(duplicates('[{"n": {"x": 1}, "n": "s"}]'), [{ index: 0, key: 'n' }]);
  });
});

describe('parseMediaType (unit)', () => {
  test('types and parameters, case-insensitive names, quoted values', () => {
    assert.deepEqual(parseMediaType('Application/JSON; Charset="UTF-8"'), { type: 'application/json', parameters: new Map([['charset', 'UTF-8']]) });
    assert.deepEqual(parseMediaType('application/json;;'), { type: 'application/json', parameters: new Map() });
  });
  test('malformed: a bare name, an open quote, two types, a repeated parameter', () => {
    for (const h of ['application/json; charset', 'application/json; charset="utf-8', 'application/json, text/plain', 'application/json; charset=utf-8; CHARSET=utf-16', 'json', '']) {
      assert.equal(parseMediaType(h), null, h);
    }
  });
});

describe('parseJsonBody (unit)', () => {
  test('a UTF-8 BOM is dropped, nothing else is', () => {
    assert.deepEqual(parseJsonBody(Buffer.from('\ufeff["\ufeffx"]')), ['\ufeffx']);
  });
  test('an empty body is undefined; bad UTF-8, bad JSON and duplicate keys throw with their codes', () => {
    assert.equal(parseJsonBody(Buffer.alloc(0)), undefined);
    assert.throws(() => parseJsonBody(Buffer.from([0x5b, 0x22, 0xff, 0x22, 0x5d])), { code: 'invalid_utf8', status: 400 });
    assert.throws(() => parseJsonBody(Buffer.from('[{')), { code: 'malformed_json', status: 400 });
    assert.throws(() => parseJsonBody(Buffer.from('[{"a": 1, "a": 2}]')), (/** @type {any} */ err) => err instanceof InvalidBatchError && err.errors[0].field === 'a');
    assert.throws(() => parseJsonBody(Buffer.from('{"a": 1, "a": 2}')), { code: 'duplicate_key', status: 400 });
  });
});
