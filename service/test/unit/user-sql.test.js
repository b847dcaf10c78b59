import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import format from 'pg-format';
import { rowsAsArrays, rowsAsValues, writeStatement } from '../../src/users/user-sql.js';

/** @typedef {import('../../src/users/user-schema.js').UserRow} UserRow */

const TRICKY = ['plain', '', "O'Brien", "''", '\\', 'a\\b', "it's \\ both", '%L %s %I', '$1', '😀 مرحبا', "E'x'", '"quoted"', ' ', 'NULL', '{a,b}', '"', '\\"'];

/** Every value the tests try: the tricky ones, and anything fast-check makes of the whole of Unicode. */
const value = fc.oneof(fc.constantFrom(...TRICKY), fc.string({ unit: 'binary' }), fc.string({ unit: fc.constantFrom("'", '\\', '"', ',', '{', '}', ' ', 'a', '%', '$') }));
/** @type {fc.Arbitrary<UserRow[]>} */
const rows = fc.array(fc.tuple(value, value, fc.option(value), fc.option(value)), { minLength: 1, maxLength: 20 });

/**
 * What PostgreSQL's array_in makes of one element written as the builder writes it: the reference
 * reading of the array syntax, for quoted elements (the builder quotes every non-NULL one).
 * @param {string} text  the array literal's text, `{...}`
 * @returns {(string | null)[]}
 */
function readArrayLiteral(text) {
  assert.ok(text.startsWith('{') && text.endsWith('}'));
  /** @type {(string | null)[]} */ const out = [];
  let i = 1;
  while (i < text.length - 1) {
    if (text.startsWith('NULL', i)) {
      out.push(null);
      i += 4;
    } else {
      assert.equal(text[i], '"');
      let s = '';
      for (i++; text[i] !== '"'; i++) s += text[i] === '\\' ? text[++i] : text[i];
      out.push(s);
      i++;
    }
    if (text[i] === ',') i++;
  }
  return out;
}

/** What a standard-conforming SQL string literal (pg-format's output) means. @param {string} sql */
function readSqlLiteral(sql) {
  const escaped = sql.startsWith('E');
  const body = sql.slice(escaped ? 2 : 1, -1).replaceAll("''", "'");
  return escaped ? body.replaceAll('\\\\', '\\') : body;
}

describe('the statement builder (unit)', () => {
  test('rowsAsValues is exactly what pg-format builds from the same rows with %L', () => {
    fc.assert(fc.property(rows, (r) => assert.equal(rowsAsValues(r), format('VALUES %L', r))));
  });

  test('rowsAsArrays: each column is one literal that reads back as exactly the column, NULLs included', () => {
    fc.assert(
      fc.property(rows, (r) => {
        const sql = rowsAsArrays(r);
        const literals = [...sql.matchAll(/(E?'(?:[^']|'')*')::text\[\]/g)].map((m) => m[1]);
        assert.equal(literals.length, 4, sql);
        literals.forEach((lit, c) => assert.deepEqual(readArrayLiteral(readSqlLiteral(lit)), r.map((row) => row[c])));
      }),
    );
  });

  test('the conflict clause and what the statement answers', () => {
    const source = 'SELECT 1';
    assert.doesNotMatch(writeStatement(source, 'fail', 'none'), /ON CONFLICT|RETURNING/);
    assert.match(writeStatement(source, 'skip', 'emails'), /ON CONFLICT \(email\) DO NOTHING RETURNING email, updated_at IS NULL AS inserted$/);
    const merge = writeStatement(source, 'merge', 'counts');
    assert.match(merge, /DO UPDATE SET[\s\S]+WHERE \(users\.name, users\.phone, users\.password_hash\)\s+IS DISTINCT FROM/);
    assert.match(merge, /^WITH written AS \(INSERT INTO users/);
    assert.match(merge, /FROM \(SELECT 1\) AS t \(email, name, phone, password_hash\)\s+WHERE NOT EXISTS \([\s\S]+ OFFSET 0\)/, 'rows stored unchanged are left out before the insert, by a probe per row');
    assert.doesNotMatch(writeStatement(source, 'skip', 'none'), /NOT EXISTS/);
  });
});

describe('the statement of return=representation (unit)', () => {
  test('returns each row written as a representation shows it, never the password hash; the other returnings are unchanged', () => {
    const sql = writeStatement('VALUES (1)', 'skip', 'rows');
    const returning = sql.slice(sql.indexOf('RETURNING'));
    assert.equal(returning, 'RETURNING email', 'what the request does not hold: which rows were written');
    assert.match(sql, /^SELECT now\(\); INSERT INTO users /, 'and when: every row it inserts was created at its transaction\'s start');
    assert.doesNotMatch(writeStatement('VALUES (1)', 'fail', 'rows'), /RETURNING/, 'all new: it wrote every row, or failed');
    assert.match(writeStatement('VALUES (1)', 'merge', 'rows'), /RETURNING email, created_at, phone, updated_at$/, 'a merge may keep a stored phone');
    assert.doesNotMatch(returning, /password/);
    assert.doesNotMatch(writeStatement('VALUES (1)', 'fail', 'none'), /RETURNING/, 'the default path returns nothing');
  });
});
