import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { parseNamedTokens } from '@sluice/env/named-tokens';

// The one reading of a secret of named tokens, which the service (INGEST_TOKENS), the feeder (its
// secret) and the rotation function share. What each makes of a refusal is tested where it is made.
describe('parseNamedTokens (unit)', () => {
  test('a JSON object of client name → token: each client with its token, in the order given', () => {
    assert.deepEqual(
      parseNamedTokens(' {"feeder": "tok-1", "crm.import": "tok-2", "a@b:c_d-e": "tok-3"} '),
      [
        { name: 'feeder', token: 'tok-1' },
        { name: 'crm.import', token: 'tok-2' },
        { name: 'a@b:c_d-e', token: 'tok-3' },
      ],
    );
  });

  test('"erase": true beside a token grants its client the right to erase; false or none does not', () => {
    assert.deepEqual(
      parseNamedTokens(
        JSON.stringify({
          ops: { token: 'tok-1', erase: true },
          feeder: { token: 'tok-2', erase: true, rate: 100 },
          crm: { token: 'tok-3', erase: false },
          web: 'tok-4',
        }),
      ),
      [
        { name: 'ops', token: 'tok-1', erase: true },
        { name: 'feeder', token: 'tok-2', limits: { rate: 100 }, erase: true },
        { name: 'crm', token: 'tok-3' },
        { name: 'web', token: 'tok-4' },
      ],
    );
  });

  for (const [text, problem] of /** @type {[string, RegExp][]} */ ([
    ['', /^must be a JSON object of client name → token, and is not valid JSON$/],
    ['plain-token-x', /and is not valid JSON$/],
    ['{"feeder": "tok-x', /and is not valid JSON$/],
    ['null', /^must be a JSON object of client name → token$/],
    ['["tok-x"]', /^must be a JSON object of client name → token$/],
    ['"tok-x"', /^must be a JSON object of client name → token$/],
    ['{}', /^holds no client/],
    ['{"feeder": "tok-a", "crm": ""}', /^gives the client "crm" no token/],
    ['{"feeder": "tok-a", " tok-x": "ops"}', /^has a client name \(its entry 2\) that is not one/],
    [`{"${'n'.repeat(65)}": "tok-x"}`, /^has a client name \(its entry 1\) that is not one/],
    ['{"feeder": 7}', /^gives the client "feeder" no token/],
    ['{"a": "tok-x", "b": "tok-y", "c": "tok-x"}', /^gives the clients "a" and "c" the same token/],
    [
      '{"ops": {"token": "tok-x", "erase": "true"}}',
      /^gives the client "ops" an erase that is not/,
    ],
    ['{"ops": {"token": "tok-x", "erase": 1}}', /^gives the client "ops" an erase that is not/],
    ['{"ops": {"token": "tok-x", "erase": null}}', /^gives the client "ops" an erase that is not/],
    [
      '{"ops": {"token": "tok-x", "erase": "tok-y"}}',
      /^gives the client "ops" an erase that is not/,
    ],
    ['{"ops": {"token": "tok-x", "erases": true}}', /"erases" that is not one: token, erase, rate/],
    ['{"ops": {"erase": true}}', /^gives the client "ops" no token/],
  ])) {
    test(`${JSON.stringify(text)} is refused: a TypeError that quotes a name at most, never a token`, () => {
      assert.throws(
        () => parseNamedTokens(text),
        (err) => {
          assert.ok(err instanceof TypeError);
          assert.match(err.message, problem);
          assert.ok(!err.message.includes('tok-'), `a token in ${err.message}`);
          return true;
        },
      );
    });
  }
});
