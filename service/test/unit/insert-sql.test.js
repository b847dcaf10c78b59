import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import format from 'pg-format';
import { buildInsertSql } from '../../src/users/user-repository.js';

/** What pg-format builds on its own from the same rows: the reference the fast path must equal. */
const reference = (/** @type {any[]} */ rows) =>
  format('INSERT INTO users (email, name, phone, password_hash) VALUES %L ON CONFLICT (email) DO NOTHING', rows);

const VALUES = [
  'plain', '', "O'Brien", "''", '\\', 'a\\b', "it's \\ both", '%L %s %I', '$1', '😀 مرحبا', 'E\'x\'', '"quoted"', ' ', 'tab\tinside',
];

describe('buildInsertSql (unit)', () => {
  test('gives exactly the SQL pg-format gives, for plain, quoted, backslashed and NULL values', () => {
    const rows = [];
    for (const a of VALUES) for (const b of VALUES) rows.push([`${a}@x.io`, b, null, b === '' ? null : `$2b$${b}`]);
    assert.equal(buildInsertSql(rows), reference(rows));
  });

  test('random strings over the characters that matter', () => {
    const alphabet = ["'", '\\', 'a', ' ', '%', '$', 'é', '"'];
    for (let n = 0; n < 200; n++) {
      const s = Array.from({ length: 1 + (n % 12) }, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join('');
      const rows = [[`${s}@x.io`, s, n % 2 ? s : null, null]];
      assert.equal(buildInsertSql(rows), reference(rows), JSON.stringify(s));
    }
  });
});
