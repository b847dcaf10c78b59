// The users table's columns are declared once (user-columns.js): everything built from the
// declaration names every column, in its order, and nothing else does. A column added to the
// declaration is then in every statement, row, message and document without a second edit.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { READ_COLUMNS, WRITE_COLUMNS } from '../../src/http/write-query.js';
import { createOpenApiDocument } from '../../src/openapi.js';
import { USER_COLUMNS, USER_FIELDS } from '../../src/user-columns.js';
import { checkUser, oncePerEmail } from '../../src/users/user-schema.js';
import * as SQL from '../../src/users/user-sql.js';

const COLUMNS = USER_COLUMNS.map((c) => c.column);
const UPDATED = USER_COLUMNS.filter((c) => c.merge !== 'key').map((c) => c.column);
/** A user with every field sent. */
const EVERY_FIELD = {
  email: 'A@x.io',
  name: 'A',
  phone: '+4412345678',
  passwordHash: '$2b$12$x',
  changedAt: '2026-11-26T10:00:00Z',
};

describe('the columns, declared once (unit)', () => {
  test('the declaration: every field once, every column once, the key first and one ordering value', () => {
    assert.equal(new Set(USER_FIELDS).size, USER_COLUMNS.length);
    assert.equal(new Set(COLUMNS).size, USER_COLUMNS.length);
    assert.equal(USER_COLUMNS[0].merge, 'key');
    assert.equal(USER_COLUMNS.filter((c) => c.merge === 'key').length, 1);
    assert.equal(USER_COLUMNS.filter((c) => c.merge === 'order').length, 1);
    assert.deepEqual(Object.keys(EVERY_FIELD), USER_FIELDS, 'the test sends every field');
  });

  test('a row has every field, in the declaration order; a merge of an email sent twice too', () => {
    const row = checkUser(EVERY_FIELD, 0);
    assert.ok(!Array.isArray(row));
    assert.deepEqual(Object.keys(row), USER_FIELDS);
    const [merged] = oncePerEmail(
      [row, /** @type {any} */ (checkUser({ email: 'a@x.io', name: 'B' }, 1))],
      'merge',
    );
    assert.deepEqual(Object.keys(merged), USER_FIELDS);
  });

  test('every statement and row source names every column, in order, with its type', () => {
    const list = COLUMNS.join(', ');
    assert.equal(SQL.COLUMNS, list);
    for (const sql of [
      SQL.copySql('t'),
      SQL.COPY_USERS,
      SQL.COPY_STREAM_STAGING,
      SQL.FROM_STAGING,
      SQL.FIRST_OF_EACH,
      SQL.ALL_AS_SENT,
    ])
      assert.ok(sql.includes(list), sql);
    assert.ok(SQL.INSERT_ALL_AS_SENT.startsWith(`INSERT INTO users (${list}) `));
    for (const create of [SQL.CREATE_STAGING, SQL.CREATE_STREAM_STAGING]) {
      for (const c of USER_COLUMNS)
        assert.match(
          create,
          new RegExp(`[(,] ?${c.column} ${c.type}[ ,)]`),
          `${c.column} in ${create}`,
        );
    }
    const casts = USER_COLUMNS.map((c) => `::${c.type}[]`);
    assert.deepEqual(SQL.ROWS_AS_PARAMETERS.match(/::\w+\[\]/g), casts);
    const row = /** @type {import('../../src/users/user-schema.js').UserRow} */ (
      checkUser(EVERY_FIELD, 0)
    );
    assert.deepEqual(SQL.rowsAsArrays([row]).match(/::\w+\[\]/g), casts);
    assert.deepEqual(
      SQL.csvLine(row),
      `${USER_FIELDS.map((f) => `"${/** @type {Record<string, string>} */ (row)[f]}"`).join(',')}\n`,
    );
    assert.deepEqual(
      SQL.columnArrays([row]),
      USER_FIELDS.map((f) => [/** @type {Record<string, string>} */ (row)[f]]),
    );
  });

  test('a merge updates every column but the key, in the upsert and in a stream', () => {
    assert.ok(SQL.MERGE.includes(`(${UPDATED.join(', ')}, updated_at) = (`));
    const aggregates = SQL.MERGED_OF_EACH.slice(
      0,
      SQL.MERGED_OF_EACH.indexOf('FROM users_stream'),
    ).split(/,\s*\n\s*/);
    assert.equal(aggregates.length, UPDATED.length, SQL.MERGED_OF_EACH);
  });

  test('what the API names: the columns one writes, those a representation shows, the OpenAPI schemas', () => {
    assert.deepEqual(WRITE_COLUMNS, USER_FIELDS);
    const shown = USER_COLUMNS.filter((c) => c.shown === true).map((c) => c.field);
    assert.deepEqual(READ_COLUMNS, [...shown, 'createdAt', 'updatedAt']);
    assert.ok(!READ_COLUMNS.includes(/** @type {any} */ ('passwordHash')));
    const row = /** @type {import('../../src/users/user-schema.js').UserRow} */ (
      checkUser(EVERY_FIELD, 0)
    );
    assert.deepEqual(Object.keys(SQL.insertedUser(row, 'now')), READ_COLUMNS);
    assert.deepEqual(
      Object.keys(SQL.mergedUser(row, ['a@x.io', '2026-11-26 10:00:00+00', null, null])),
      READ_COLUMNS,
    );
    const { schemas } = createOpenApiDocument({ maxBatchItems: 10, maxBodyBytes: 1000 }).components;
    assert.deepEqual(Object.keys(schemas.User.properties), USER_FIELDS);
    for (const c of USER_COLUMNS)
      assert.equal(schemas.User.properties[c.field].description, c.description);
    assert.deepEqual(Object.keys(schemas.UserRow.properties), [...READ_COLUMNS, 'outcome']);
  });
});
