import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseWriteQuery } from '../../src/http/write-query.js';

/** @param {string} search @param {string} code @param {RegExp} [message] */
const refused = (search, code, message) =>
  assert.throws(
    () => parseWriteQuery(search),
    (/** @type {any} */ err) => {
      assert.equal(err.code, code, `${search}: ${err.message}`);
      if (message) assert.match(err.message, message);
      return true;
    },
  );

describe('the query of POST /users: on_conflict, columns, select (unit)', () => {
  test('none, or parameters sluice does not read: nothing asked', () => {
    assert.deepEqual(parseWriteQuery(''), {});
    assert.deepEqual(parseWriteQuery('name=eq.x&limit=3'), {});
  });

  test('on_conflict=email is the only conflict target; another column of users is named in a 400, an unknown one too', () => {
    assert.deepEqual(parseWriteQuery('on_conflict=email'), {});
    assert.deepEqual(parseWriteQuery('on_conflict=%22email%22'), {});
    refused(
      'on_conflict=phone',
      'unsupported_conflict_target',
      /on_conflict=phone: phone is not a unique key/,
    );
    refused('on_conflict=email,name', 'unsupported_conflict_target', /email, name are not/);
    refused('on_conflict=nickname', 'unknown_column', /'nickname'/);
    refused('on_conflict=', 'unsupported_query');
    refused('on_conflict=email&on_conflict=email', 'unsupported_query', /2 times/);
  });

  test('columns, as postgrest-js sends them (quoted, comma-separated): the keys to read', () => {
    assert.deepEqual(parseWriteQuery(`columns=${encodeURIComponent('"email","name","phone"')}`), {
      columns: ['email', 'name', 'phone'],
    });
    assert.deepEqual(parseWriteQuery('columns=email, name,passwordHash'), {
      columns: ['email', 'name', 'passwordHash'],
    });
    refused(
      'columns=email,nickname',
      'unknown_column',
      /'nickname'.*columns are email, name, phone, passwordHash, changedAt/,
    );
    assert.deepEqual(
      parseWriteQuery('columns=email,password'),
      { columns: ['email', 'password'] },
      'for the validator to say: send passwordHash',
    );
  });

  test('select: * or columns, in the order asked; never the hash; nothing PostgREST embeds or renames', () => {
    assert.deepEqual(parseWriteQuery('select=*'), {
      select: ['email', 'name', 'phone', 'createdAt', 'updatedAt'],
    });
    assert.deepEqual(parseWriteQuery('select=updatedAt,email'), { select: ['updatedAt', 'email'] });
    assert.deepEqual(
      parseWriteQuery('select=*,outcome'),
      { select: ['email', 'name', 'phone', 'createdAt', 'updatedAt', 'outcome'] },
      'outcome only when named',
    );
    refused('select=passwordHash', 'unknown_column', /never returned/);
    refused('select=email,nickname', 'unknown_column', /'nickname'/);
    for (const select of ['orders(id)', 'mail:email', 'email::text', 'data->x', 'count()'])
      refused(`select=${encodeURIComponent(select)}`, 'unsupported_query');
  });
});
