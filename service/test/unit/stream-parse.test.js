import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { ApiError } from '../../src/errors.js';
import {
  MAX_RECORD_CHARS,
  createCsvParser,
  createNdjsonParser,
} from '../../src/users/stream-parse.js';

/**
 * Every record of `text` fed in the pieces `cuts` make of it.
 * @param {import('../../src/users/stream-types.js').RecordParser} parser @param {string} text @param {number[]} [cuts]
 */
function parseAll(parser, text, cuts = []) {
  /** @type {{ item: unknown, line: number, duplicates: string[] }[]} */
  const records = [];
  /** @type {import('../../src/users/stream-types.js').OnRecord} */
  const onRecord = (item, line, duplicates) => records.push({ item, line, duplicates });
  let from = 0;
  for (const cut of [...new Set(cuts)].sort((a, b) => a - b)) {
    parser.feed(text.slice(from, cut), onRecord);
    from = cut;
  }
  parser.feed(text.slice(from), onRecord);
  parser.end(onRecord);
  return records;
}

/** @param {() => unknown} fn @param {string} code @param {RegExp} message */
function refuses(fn, code, message) {
  assert.throws(
    fn,
    (err) => err instanceof ApiError && err.code === code && message.test(err.message),
  );
}

// Field values with everything CSV must quote: commas, quotes, CR, LF, and characters beyond ASCII.
const value = fc.string({
  unit: fc.constantFrom('a', 'Z', ' ', ',', '"', '\n', '\r', 'é', '😀', '\\', '{'),
  maxLength: 12,
});
const user = fc.record(
  {
    email: value,
    name: value,
    phone: fc.option(value, { nil: undefined }),
    passwordHash: fc.option(value, { nil: undefined }),
  },
  { requiredKeys: ['email', 'name'] },
);
/** @param {string} v */
const quote = (v) => `"${v.replaceAll('"', '""')}"`;
/** @param {string} text */
const newlines = (text) => text.split('\n').length - 1;

describe('streamed bodies, parsed (unit)', () => {
  test('CSV: every record as sent, wherever the text is cut, on the line it starts', () => {
    fc.assert(
      fc.property(
        fc.array(user, { maxLength: 20 }),
        fc.array(fc.nat(), { maxLength: 10 }),
        fc.boolean(),
        (users, cuts, crlf) => {
          const eol = crlf ? '\r\n' : '\n';
          let text = `email,name,phone,passwordHash${eol}`;
          const lines = [];
          for (const u of users) {
            lines.push(newlines(text) + 1);
            text +=
              [u.email, u.name, u.phone, u.passwordHash]
                .map((v) => (v === undefined ? '' : quote(v)))
                .join(',') + eol;
          }
          const records = parseAll(
            createCsvParser(),
            text,
            cuts.map((c) => c % (text.length + 1)),
          );
          assert.deepEqual(
            records.map((r) => r.item),
            users.map((u) =>
              Object.fromEntries(Object.entries(u).filter(([, v]) => v !== undefined)),
            ),
          );
          assert.deepEqual(
            records.map((r) => r.line),
            lines,
          );
        },
      ),
    );
  });

  test('NDJSON: every line as sent, wherever the text is cut, blank lines skipped but counted', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(user, fc.constantFrom('\n', '\r\n', '\n\n', '\n  \n')), {
          maxLength: 20,
        }),
        fc.array(fc.nat(), { maxLength: 10 }),
        (entries, cuts) => {
          let text = '';
          const lines = [];
          for (const [u, eol] of entries) {
            lines.push(newlines(text) + 1);
            text += JSON.stringify(u) + eol;
          }
          const records = parseAll(
            createNdjsonParser(),
            text,
            cuts.map((c) => c % (text.length + 1)),
          );
          assert.deepEqual(
            records.map((r) => r.item),
            entries.map(([u]) => JSON.parse(JSON.stringify(u))),
          );
          assert.deepEqual(
            records.map((r) => r.line),
            lines,
          );
        },
      ),
    );
  });

  test('CSV: unquoted fields, an empty field not sent, "" sent empty, a last record without its line break', () => {
    const records = parseAll(
      createCsvParser(),
      '\ufeffname,email\r\nAda,a@x.io\r\n\r\n"",b@x.io\n,c@x.io',
    );
    assert.deepEqual(records, [
      { item: { name: 'Ada', email: 'a@x.io' }, line: 2, duplicates: [] },
      { item: { name: '', email: 'b@x.io' }, line: 4, duplicates: [] },
      { item: { email: 'c@x.io' }, line: 5, duplicates: [] },
    ]);
  });

  test('CSV: malformed headers and records are refused naming their line', () => {
    refuses(
      () => parseAll(createCsvParser(), 'email,name,nick\n'),
      'malformed_csv',
      /^line 1: the header names a column "nick"/,
    );
    refuses(
      () => parseAll(createCsvParser(), 'email,email,name\n'),
      'malformed_csv',
      /^line 1: the header names the column email twice/,
    );
    refuses(
      () => parseAll(createCsvParser(), 'email,phone\n'),
      'malformed_csv',
      /^line 1: the header must name the column name/,
    );
    refuses(
      () => parseAll(createCsvParser(), 'email,name\na@x.io,"A\nB"\nb@x.io\n'),
      'malformed_csv',
      /^line 4: the record has 1 field where the header names 2/,
    );
    refuses(
      () => parseAll(createCsvParser(), 'email,name\na@x.io,A"B\n'),
      'malformed_csv',
      /^line 2: a double quote inside a field/,
    );
    refuses(
      () => parseAll(createCsvParser(), 'email,name\na@x.io,"A"B\n'),
      'malformed_csv',
      /^line 2: a quoted field must be followed by a comma/,
    );
    refuses(
      () => parseAll(createCsvParser(), 'email,name\na@x.io,"AB\n'),
      'malformed_csv',
      /^line 2: a quoted field is not closed/,
    );
    refuses(
      () => parseAll(createCsvParser(), `email,name\na@x.io,"${'x'.repeat(MAX_RECORD_CHARS)}`),
      'malformed_csv',
      /^line 2: a quoted field is not closed within 65536 characters/,
    );
    refuses(
      () => parseAll(createCsvParser(), '\n\n'),
      'malformed_csv',
      /^line 1: the body has no header row/,
    );
    assert.deepEqual(parseAll(createCsvParser(), ''), []);
  });

  test('CSV: an unclosed quote in a long body says so, however the body is cut; a record long outside quotes is too long', () => {
    const unclosed = `email,name\na@x.io,"A\n${'b@x.io,B\n'.repeat(10_000)}`;
    for (const cuts of [[], [100], [5000, 70_000], [65_560, 65_561]]) {
      refuses(
        () => parseAll(createCsvParser(), unclosed, cuts),
        'malformed_csv',
        /^line 2: a quoted field is not closed within 65536 characters/,
      );
    }
    const longField = `email,name\na@x.io,"${'x'.repeat(MAX_RECORD_CHARS)}"\n`;
    for (const cuts of [[], [MAX_RECORD_CHARS + 5]])
      refuses(
        () => parseAll(createCsvParser(), longField, cuts),
        'malformed_csv',
        /^line 2: a quoted field is not closed within/,
      );
    const longRecord = `email,name\na@x.io,${'x'.repeat(MAX_RECORD_CHARS)}\n`;
    for (const cuts of [[], [1000]])
      refuses(
        () => parseAll(createCsvParser(), longRecord, cuts),
        'malformed_csv',
        /^line 2: the record is longer than/,
      );
    const closedThenLong = `email,name\n"a@x.io","${'y'.repeat(MAX_RECORD_CHARS)}\n`;
    refuses(
      () => parseAll(createCsvParser(), closedThenLong),
      'malformed_csv',
      /^line 2: a quoted field is not closed within/,
    );
  });

  test('NDJSON: a line that is not JSON, or too long, is refused naming it; a key given twice is reported', () => {
    refuses(
      () => parseAll(createNdjsonParser(), '{"a":1}\n\n{"a":\n'),
      'malformed_json',
      /^line 3 is not valid JSON/,
    );
    refuses(
      () => parseAll(createNdjsonParser(), `{"a":1}\n"${'x'.repeat(MAX_RECORD_CHARS)}`, [10, 20]),
      'malformed_json',
      /^line 2 is longer than/,
    );
    assert.deepEqual(parseAll(createNdjsonParser(), '\ufeff{"name":"a","name":"b"}'), [
      { item: { name: 'b' }, line: 1, duplicates: ['name'] },
    ]);
    assert.deepEqual(parseAll(createNdjsonParser(), '[1]\n7\n'), [
      { item: [1], line: 1, duplicates: [] },
      { item: 7, line: 2, duplicates: [] },
    ]);
  });
});
