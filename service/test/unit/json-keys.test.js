import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { findDuplicateKeys } from '../../src/json-keys.js';

/** @param {string} text */
const duplicates = (text) => findDuplicateKeys(text, JSON.parse(text));

describe('findDuplicateKeys (unit)', () => {
  test('none in ordinary batches, whatever the strings hold', () => {
    assert.deepEqual(duplicates('[{"a": "x", "b": "y"}, {"a": "x", "b": "y"}]'), []);
    assert.deepEqual(
      duplicates('[{"a": "\\"a\\": 1, \\"a\\": 2", "b": "\\\\", "c": ":\\\\\\"a\\":"}]'),
      [],
    );
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
    assert.deepEqual(duplicates('[{"email": 1, "em\\u0061il"\n\t :2}]'), [
      { index: 0, key: 'email' },
    ]);
  });

  test('nested and top-level objects: found, with the item index or null', () => {
    assert.deepEqual(duplicates('[{"n": {"x": 1, "x": 2}}]'), [{ index: 0, key: 'x' }]);
    assert.deepEqual(duplicates('{"k": 1, "k": 2}'), [{ index: null, key: 'k' }]);
  });

  test('a duplicate hidden inside a value that was itself overwritten still counts', () => {
    assert.deepEqual(duplicates('[{"n": {"x": 1}, "n": "s"}]'), [{ index: 0, key: 'n' }]);
  });

  test('__proto__ is a key like any other', () => {
    assert.deepEqual(duplicates('[{"__proto__": 1, "__proto__": {}}]'), [
      { index: 0, key: '__proto__' },
    ]);
  });

  test('at most `limit` are located', () => {
    const text = JSON.stringify(Array.from({ length: 5 }, () => ({}))).replaceAll(
      '{}',
      '{"a":1,"a":2}',
    );
    assert.equal(findDuplicateKeys(text, JSON.parse(text), 3).length, 3);
    assert.equal(findDuplicateKeys(text, JSON.parse(text)).length, 5);
  });
});

// Random JSON texts, duplicate keys included, written with the spellings a client may use (escaped
// keys, whitespace, strings full of quotes, backslashes, colons and brackets), against a reference
// that reads the same duplicates off the tree the text was written from.

/** @typedef {{ kind: 'leaf', text: string } | { kind: 'array', items: Node[] } | { kind: 'object', pairs: Pair[] }} Node */
/** @typedef {{ key: string, spelling: string, before: string, after: string, value: Node }} Pair */

const WHITESPACE = fc.constantFrom('', ' ', '\n', '\t ', '\r\n  ');
const TRICKY = fc.string({
  unit: fc.constantFrom(
    'a',
    'b',
    '"',
    '\\',
    ':',
    ',',
    '{',
    '}',
    '[',
    ']',
    ' ',
    'é',
    '😀',
    '\u2028',
    '\u0000',
  ),
  maxLength: 6,
});
const KEY = fc.oneof(
  fc.constantFrom('a', 'b', 'email', 'name', '__proto__', '"', '\\', 'a:b', ''),
  TRICKY,
);
/** Every UTF-16 unit as \uXXXX: the same key, spelt differently. @param {string} key */
const escapedSpelling = (key) =>
  `"${Array.from({ length: key.length }, (_, i) => `\\u${key.charCodeAt(i).toString(16).padStart(4, '0')}`).join('')}"`;
const SPELT_KEY = fc
  .tuple(KEY, fc.boolean())
  .map(([key, escape]) => ({ key, spelling: escape ? escapedSpelling(key) : JSON.stringify(key) }));

const { node: NODE } = fc.letrec((tie) => ({
  node: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    tie('leaf'),
    tie('array'),
    tie('object'),
  ),
  leaf: fc
    .oneof(
      TRICKY.map((s) => JSON.stringify(s)),
      fc.constantFrom('0', '-1.5e3', 'true', 'false', 'null'),
    )
    .map((text) => ({ kind: 'leaf', text })),
  array: fc.array(tie('node'), { maxLength: 4 }).map((items) => ({ kind: 'array', items })),
  object: fc
    .array(
      fc.record({ spelt: SPELT_KEY, before: WHITESPACE, after: WHITESPACE, value: tie('node') }),
      { maxLength: 5 },
    )
    .map((pairs) => ({
      kind: 'object',
      pairs: pairs.map(({ spelt, before, after, value }) => ({ ...spelt, before, after, value })),
    })),
}));
// A body is mostly an array of objects (a batch), sometimes anything.
const BODY = fc.oneof(
  fc.array(NODE, { maxLength: 6 }).map((items) => /** @type {Node} */ ({ kind: 'array', items })),
  NODE,
);

/** @param {Node} node @returns {string} */
function write(node) {
  if (node.kind === 'leaf') return node.text;
  if (node.kind === 'array') return `[${node.items.map(write).join(', ')}]`;
  return `{${node.pairs.map((p) => `${p.spelling}${p.before}:${p.after}${write(p.value)}`).join(',')}}`;
}

/** The duplicates, in text order (a key comes before its value). @param {Node} body */
function reference(body) {
  /** @type {{ index: number | null, key: string }[]} */
  const found = [];
  /** @param {Node} node @param {number | null} index */
  const walk = (node, index) => {
    if (node.kind === 'array') for (const item of node.items) walk(item, index);
    if (node.kind !== 'object') return;
    const seen = new Set();
    for (const pair of node.pairs) {
      if (seen.has(pair.key)) found.push({ index, key: pair.key });
      seen.add(pair.key);
      walk(pair.value, index);
    }
  };
  if (body.kind === 'array') body.items.forEach((item, i) => walk(item, i));
  else walk(body, null);
  return found;
}

describe('findDuplicateKeys against a reference (property)', () => {
  test('on random JSON it finds exactly the duplicates the reference finds, in the same order', () => {
    fc.assert(
      fc.property(BODY, (body) => {
        const text = write(body);
        assert.deepEqual(findDuplicateKeys(text, JSON.parse(text)), reference(body), text);
      }),
      { numRuns: 2000 },
    );
  });

  test('the generator does write duplicates, escaped keys and clean bodies (so the property is not vacuous)', () => {
    const bodies = fc.sample(BODY, { numRuns: 500, seed: 42 });
    assert.ok(bodies.filter((b) => reference(b).length > 0).length > 50, 'bodies with duplicates');
    assert.ok(
      bodies.filter((b) => reference(b).length === 0 && write(b).includes(':')).length > 50,
      'bodies with keys and no duplicate',
    );
    assert.ok(
      bodies.some((b) => write(b).includes('\\u00') && reference(b).length > 0),
      'an escaped key among duplicates',
    );
  });
});
