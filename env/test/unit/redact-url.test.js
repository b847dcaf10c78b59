import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { redactUrl } from '@sluice/env';

describe('redactUrl (unit)', () => {
  test('the password of the user part is hidden, the rest shown as written', () => {
    assert.equal(
      redactUrl('postgresql+psycopg://sluice:S3cretPassw0rd@127.0.0.1:55432/sluice'),
      'postgresql+psycopg://sluice:***@127.0.0.1:55432/sluice',
    );
    assert.equal(
      redactUrl('postgres://u:p%40ss@db.internal/app?sslmode=require'),
      'postgres://u:***@db.internal/app?sslmode=require',
    );
    // Unescaped @, / and ? in a password: hidden whole, up to the last @.
    assert.equal(redactUrl('postgres://u:a@b/c?d@host:5432/db'), 'postgres://u:***@host:5432/db');
    assert.equal(
      redactUrl('sluice:pw@127.0.0.1:5432/sluice'),
      'sluice:***@127.0.0.1:5432/sluice',
      'no scheme',
    );
  });

  test('a secret in the query string or a libpq keyword string is hidden', () => {
    assert.equal(
      redactUrl('postgres://h/db?sslmode=verify-full&sslpassword=K3y&password=P4ss'),
      'postgres://h/db?sslmode=verify-full&sslpassword=***&password=***',
    );
    assert.equal(
      redactUrl('https://collector:4318/v1/traces?token=T0k&api_key=A&X-Amz-Signature=S'),
      'https://collector:4318/v1/traces?token=***&api_key=***&X-Amz-Signature=***',
    );
    assert.equal(
      redactUrl("host=db user=u password='two words' dbname=x"),
      'host=db user=u password=*** dbname=x',
    );
    assert.equal(redactUrl('host=db password=p4ss'), 'host=db password=***');
  });

  test('nothing to hide: unchanged', () => {
    for (const text of [
      'http://127.0.0.1:3000',
      'postgres://sluice@127.0.0.1:5432/sluice',
      'postgres://h:5432/db?owner=a@b.c',
      'not a url',
    ])
      assert.equal(redactUrl(text), text);
  });
});
