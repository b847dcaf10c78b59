import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import format from 'pg-format';
import {
  decodeWrittenUsers,
  rowsAsArrays,
  rowsAsValues,
  writeFromStaging,
  writeStatement,
  writeWithCounts,
  writeWithEmails,
  writeWithUsers,
} from '../../src/users/user-sql.js';
import { userRow } from '../../../test/support/user-rows.js';

/** @typedef {import('../../src/users/user-schema.js').UserRow} UserRow */

const TRICKY = [
  'plain',
  '',
  "O'Brien",
  "''",
  '\\',
  'a\\b',
  "it's \\ both",
  '%L %s %I',
  '$1',
  '😀 مرحبا',
  "E'x'",
  '"quoted"',
  ' ',
  'NULL',
  '{a,b}',
  '"',
  '\\"',
];

/** Every value the tests try: the tricky ones, and anything fast-check makes of the whole of Unicode. */
const value = fc.oneof(
  fc.constantFrom(...TRICKY),
  fc.string({ unit: 'binary' }),
  fc.string({ unit: fc.constantFrom("'", '\\', '"', ',', '{', '}', ' ', 'a', '%', '$') }),
);
/** A changedAt as the validator lets it through: RFC 3339 with an offset, up to 6 fractional digits. */
const changedAt = fc
  .tuple(
    fc.date({
      min: new Date('0001-01-01T00:00:00Z'),
      max: new Date('9999-12-31T23:59:59Z'),
      noInvalidDate: true,
    }),
    fc.integer({ min: 0, max: 999 }),
  )
  .map(([d, micros]) => d.toISOString().replace('Z', `${String(micros).padStart(3, '0')}Z`));
/** @type {fc.Arbitrary<UserRow[]>} */
const rows = fc.array(
  fc.record({
    email: value,
    name: value,
    phone: fc.option(value),
    passwordHash: fc.option(value),
    changedAt: fc.option(changedAt),
  }),
  { minLength: 1, maxLength: 20 },
);
/** The text columns, in the statement's order. */
const TEXT_FIELDS = /** @type {const} */ (['email', 'name', 'phone', 'passwordHash']);

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
    fc.assert(
      fc.property(rows, (r) =>
        assert.equal(
          rowsAsValues(r),
          format(
            'VALUES %s',
            r
              .map((row) =>
                format(
                  '(%L, %L, %L, %L, %L::timestamptz)',
                  row.email,
                  row.name,
                  row.phone,
                  row.passwordHash,
                  row.changedAt,
                ),
              )
              .join(', '),
          ),
        ),
      ),
    );
  });

  test('rowsAsArrays: each column is one literal that reads back as exactly the column, NULLs included', () => {
    fc.assert(
      fc.property(rows, (r) => {
        const sql = rowsAsArrays(r);
        const literals = [...sql.matchAll(/(E?'(?:[^']|'')*')::text\[\]/g)].map((m) => m[1]);
        assert.equal(literals.length, 4, sql);
        literals.forEach((lit, c) =>
          assert.deepEqual(
            readArrayLiteral(readSqlLiteral(lit)),
            r.map((row) => row[TEXT_FIELDS[c]]),
          ),
        );
        const changes = /** @type {RegExpMatchArray} */ (
          sql.match(/(E?'(?:[^']|'')*')::timestamptz\[\]\)$/)
        );
        const read = readArrayLiteral(readSqlLiteral(changes[1]));
        // No row with an ordering value: an empty array, which unnest pads with NULLs.
        assert.deepEqual(
          read,
          r.every((row) => row.changedAt === null) ? [] : r.map((row) => row.changedAt),
        );
      }),
    );
  });

  test('the conflict clause and what the statement answers', () => {
    const source = 'SELECT 1';
    assert.doesNotMatch(writeStatement(source, 'fail', 'none'), /ON CONFLICT|RETURNING/);
    assert.match(
      writeStatement(source, 'skip', 'emails'),
      /ON CONFLICT \(email\) DO NOTHING RETURNING email, updated_at IS NULL AS inserted$/,
    );
    const merge = writeStatement(source, 'merge', 'counts');
    assert.match(
      merge,
      /DO UPDATE SET\s+\(name, phone, password_hash, changed_at, updated_at\) = \(EXCLUDED\.name, [^)]+\), [^)]+\), EXCLUDED\.changed_at, now\(\)\)/,
    );
    assert.match(
      merge,
      /DO UPDATE SET[\s\S]+WHERE \(users\.name, users\.phone, users\.password_hash, users\.changed_at\)\s+IS DISTINCT FROM/,
    );
    assert.match(
      merge,
      /IS DISTINCT FROM [^\n]+\n\s+AND NOT \(users\.changed_at IS NOT NULL AND \(EXCLUDED\.changed_at IS NULL OR EXCLUDED\.changed_at <= users\.changed_at\)\)/,
      'a stored row is replaced only by a strictly newer change; a change without one never replaces a row that has one',
    );
    assert.match(
      merge,
      /^WITH written AS \(INSERT INTO users \(email, name, phone, password_hash, changed_at\)/,
    );
    assert.match(
      merge,
      /FROM \(SELECT 1\) AS t \(email, name, phone, password_hash, changed_at\)\s+WHERE NOT EXISTS \([\s\S]+ OFFSET 0\)/,
      'rows stored unchanged are left out before the insert, by a probe per row',
    );
    assert.match(
      merge,
      /WHERE NOT EXISTS \(SELECT FROM users u WHERE u\.email = t\.email COLLATE "C"\s+AND \(\([^)]+\) IS NOT DISTINCT FROM \([\s\S]+\) OR \(u\.changed_at IS NOT NULL AND \(t\.changed_at IS NULL OR t\.changed_at <= u\.changed_at\)\)\) OFFSET 0\)/,
      'stale changes are left out by the same probe (no second one)',
    );
    assert.equal(merge.match(/SELECT FROM users/g)?.length, 1, 'one probe of users a row');
    assert.doesNotMatch(writeStatement(source, 'skip', 'none'), /NOT EXISTS/);
  });
});

describe('the statement of return=representation (unit)', () => {
  test('returns each row written as a representation shows it, never the password hash; the other returnings are unchanged', () => {
    const sql = writeStatement('VALUES (1)', 'skip', 'rows');
    const returning = sql.slice(sql.indexOf('RETURNING'));
    assert.equal(
      returning,
      'RETURNING email',
      'what the request does not hold: which rows were written',
    );
    assert.match(
      sql,
      /^SELECT now\(\); INSERT INTO users /,
      "and when: every row it inserts was created at its transaction's start",
    );
    assert.doesNotMatch(
      writeStatement('VALUES (1)', 'fail', 'rows'),
      /RETURNING/,
      'all new: it wrote every row, or failed',
    );
    assert.match(
      writeStatement('VALUES (1)', 'merge', 'rows'),
      /RETURNING email, created_at, phone, updated_at$/,
      'a merge may keep a stored phone',
    );
    assert.doesNotMatch(returning, /password/);
    assert.doesNotMatch(
      writeStatement('VALUES (1)', 'fail', 'none'),
      /RETURNING/,
      'the default path returns nothing',
    );
  });
});

/** A pg result as a query answers it. @param {string} command @param {unknown[]} rows @returns {any} */
const result = (command, rows) => ({ command, rows, rowCount: rows.length, oid: 0, fields: [] });

describe("each statement's decoder, beside it (unit)", () => {
  test('a write answered in counts: its counts row when it merges, else its command tag', () => {
    const merge = writeWithCounts('SELECT 1', 'merge', ['v']);
    assert.equal(merge.text, writeStatement('SELECT 1', 'merge', 'counts'));
    assert.deepEqual(merge.values, ['v']);
    const counts = { inserted: 2, updated: 3 };
    assert.equal(merge.decode([result('SET', []), result('SELECT', [counts])]), counts);
    for (const onConflict of /** @type {const} */ (['fail', 'skip'])) {
      const write = writeWithCounts('SELECT 1', onConflict);
      assert.equal(write.text, writeStatement('SELECT 1', onConflict, 'none'));
      assert.deepEqual(write.decode(result('INSERT', [{}, {}])), { inserted: 2, updated: 0 });
    }
    const staged = writeFromStaging('skip');
    assert.equal(
      staged.text,
      `${writeWithCounts('SELECT email, name, phone, password_hash, changed_at FROM users_staging', 'skip').text}; TRUNCATE users_staging`,
    );
    assert.deepEqual(
      staged.decode([result('INSERT', [{}]), result('TRUNCATE', [])]),
      { inserted: 1, updated: 0 },
      "the write's result, the first",
    );
  });

  test('a write answered by each email it wrote, and whether it inserted it', () => {
    const write = writeWithEmails('SELECT 1', 'merge');
    assert.equal(write.text, writeStatement('SELECT 1', 'merge', 'emails'));
    const rows = [
      { email: 'a@x.io', inserted: true },
      { email: 'b@x.io', inserted: false },
    ];
    assert.deepEqual(
      write.decode([result('SET', []), result('INSERT', rows)]),
      new Map([
        ['a@x.io', true],
        ['b@x.io', false],
      ]),
    );
  });

  test('a write answered by the rows it wrote: as sent, else as stored (merge), in the order sent whatever the order returned', () => {
    const CREATED = '2026-11-25 04:15:04.123456+00';
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.emailAddress(), { minLength: 1, maxLength: 20 }),
        fc.func(fc.boolean()),
        fc.boolean(),
        fc.constantFrom('fail', 'skip', 'merge'),
        (emails, written, shuffled, onConflict) => {
          const sent = emails.sort().map((e, i) =>
            userRow({
              email: e,
              name: `name ${i}`,
              phone: i % 2 ? null : `+1555010010${i % 10}`,
            }),
          );
          const merge = onConflict === 'merge';
          const kept = onConflict === 'fail' ? sent : sent.filter((r) => written(r.email));
          const returned = kept.map((r) =>
            merge
              ? [r.email, CREATED, '+15550100999', r.phone ? null : '2026-11-26 00:00:00+01']
              : [r.email],
          );
          if (shuffled) returned.reverse();
          const answer = merge
            ? result('INSERT', returned)
            : [result('SET', []), result('SELECT', [[CREATED]]), result('INSERT', returned)];
          const statement = writeWithUsers(sent, 'SELECT 1', onConflict);
          assert.equal(statement.text, writeStatement('SELECT 1', onConflict, 'rows'));
          assert.equal(statement.rowMode, 'array');
          const users = statement.decode(answer);
          assert.deepEqual(users, decodeWrittenUsers(sent, answer, onConflict));
          assert.deepEqual(
            users.map((u) => u.email),
            kept.map((r) => r.email),
          );
          for (const [i, u] of users.entries()) {
            assert.equal(u.name, kept[i].name);
            assert.equal(u.phone, merge ? '+15550100999' : kept[i].phone);
            assert.equal(u.createdAt, '2026-11-25T04:15:04.123456+00:00');
            assert.equal(u.updatedAt, merge && !kept[i].phone ? '2026-11-26T00:00:00+01:00' : null);
          }
        },
      ),
    );
  });
});
