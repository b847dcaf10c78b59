import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { parseMediaType } from '../../src/http/media-type.js';

describe('parseMediaType (unit)', () => {
  test('types and parameters, case-insensitive names, quoted values', () => {
    assert.deepEqual(parseMediaType('Application/JSON; Charset="UTF-8"'), {
      type: 'application/json',
      parameters: new Map([['charset', 'UTF-8']]),
    });
    assert.deepEqual(parseMediaType('application/json;;'), {
      type: 'application/json',
      parameters: new Map(),
    });
  });

  test('whitespace around the semicolons and at the end is allowed; around "=" it is not', () => {
    assert.deepEqual(parseMediaType('application/json \t; charset=utf-8 \t'), {
      type: 'application/json',
      parameters: new Map([['charset', 'utf-8']]),
    });
    assert.equal(parseMediaType('application/json; charset = utf-8'), null);
    assert.equal(parseMediaType(' application/json'), null);
  });

  test('a quoted value keeps its escaped quotes and backslashes, unescaped', () => {
    assert.deepEqual(
      parseMediaType('text/plain; note="a \\"b\\" \\\\ c;d"').parameters.get('note'),
      'a "b" \\ c;d',
    );
  });

  test('malformed: a bare name, an open quote, two types, a repeated parameter', () => {
    for (const h of [
      'application/json; charset',
      'application/json; charset="utf-8',
      'application/json, text/plain',
      'application/json; charset=utf-8; CHARSET=utf-16',
      'json',
      '',
      'application/',
      '/json',
      'application/json; =utf-8',
    ]) {
      assert.equal(parseMediaType(h), null, h);
    }
  });
});

// RFC 9110 8.3.1: media-type = type "/" subtype parameters; a parameter is OWS ";" OWS [ name "=" value ],
// a value a token or a quoted-string.
const TOKEN = fc.string({
  unit: fc.constantFrom(
    ..."!#$%&'*+.^_`|~-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
  ),
  minLength: 1,
  maxLength: 8,
});
const OWS = fc.constantFrom('', ' ', '\t', ' \t ');
// qdtext is HTAB, SP, VCHAR but '"' and '\', and obs-text; any VCHAR may be sent escaped.
const QUOTABLE = fc.string({
  unit: fc.constantFrom(
    '\t',
    ' ',
    'a',
    'Z',
    '0',
    '"',
    '\\',
    ';',
    '=',
    ',',
    '(',
    '~',
    '\u00e9',
    '\u00ff',
  ),
  maxLength: 8,
});
const VALUE = fc.oneof(
  TOKEN.map((value) => ({ value, text: value })),
  fc.tuple(QUOTABLE, fc.boolean()).map(([value, escapeAll]) => ({
    value,
    text: `"${[...value].map((c) => (c === '"' || c === '\\' || (escapeAll && c !== '\t' && c !== ' ') ? `\\${c}` : c)).join('')}"`,
  })),
);
const PARAMETERS = fc.uniqueArray(
  fc.record({ name: TOKEN, value: VALUE, before: OWS, after: OWS, emptyBefore: fc.boolean() }),
  {
    maxLength: 4,
    selector: (p) => p.name.toLowerCase(),
  },
);

describe('parseMediaType on generated headers (property)', () => {
  test('every well-formed header is read back: the type lower-cased, each parameter by its lower-cased name with its value unquoted', () => {
    fc.assert(
      fc.property(TOKEN, TOKEN, PARAMETERS, OWS, (type, subtype, parameters, trailing) => {
        const header = `${type}/${subtype}${parameters.map((p) => `${p.emptyBefore ? ';' : ''}${p.before};${p.after}${p.name}=${p.value.text}`).join('')}${trailing}`;
        assert.deepEqual(
          parseMediaType(header),
          {
            type: `${type}/${subtype}`.toLowerCase(),
            parameters: new Map(parameters.map((p) => [p.name.toLowerCase(), p.value.value])),
          },
          header,
        );
      }),
      { numRuns: 1000 },
    );
  });

  test('a parameter given twice, in any case, makes the header malformed', () => {
    fc.assert(
      fc.property(TOKEN, TOKEN, TOKEN, TOKEN, fc.boolean(), (type, name, first, second, upper) => {
        const again = upper ? name.toUpperCase() : name.toLowerCase();
        return parseMediaType(`${type}/json; ${name}=${first}; ${again}=${second}`) === null;
      }),
    );
  });

  test('whatever a client sends, the answer is null or a type with a slash, never an exception', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary-ascii', maxLength: 40 }), (header) => {
        const parsed = parseMediaType(header);
        return (
          parsed === null ||
          (parsed.type.includes('/') && parsed.type === parsed.type.toLowerCase())
        );
      }),
    );
  });
});
