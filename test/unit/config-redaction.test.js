// No configuration message shows a credential: every URL-valued variable any component declares
// (found in the declarations docs/configuration.md is made from, not listed here) is refused with
// its value quoted without the password of its user part or of its query string.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadEnv } from '@sluice/env';
import { SECTIONS } from '../../scripts/configuration-doc.js';

const SECRETS = ['S3cretPassw0rd', 'Qu3ryPassw0rd', 'T0kenValue'];
const REFUSED = [
  // A scheme no URL variable takes, so each refuses it.
  'postgresql+psycopg://sluice:S3cretPassw0rd@127.0.0.1:55432/sluice?sslpassword=Qu3ryPassw0rd&token=T0kenValue',
  // No URL at all: a libpq keyword string, and a URL without its scheme.
  'host=db user=sluice password=S3cretPassw0rd sslpassword=Qu3ryPassw0rd',
  'sluice:S3cretPassw0rd@127.0.0.1:5432/sluice?password=Qu3ryPassw0rd',
];

const declared = SECTIONS.flatMap((section) => Object.entries(section.declarations));
const urlVariables = declared.filter(
  ([name, variable]) => /_(URL|ENDPOINT)$/.test(name) || variable.parser.kind.startsWith('a URL'),
);

describe('URL-valued variables in configuration messages (unit)', () => {
  test('each is declared with the URL parser', () => {
    assert.ok(urlVariables.length >= 8, urlVariables.map(([name]) => name).join(', '));
    for (const [name, variable] of urlVariables)
      assert.match(variable.parser.kind, /^a URL/, `${name} is not read as a URL`);
  });

  for (const [name, variable] of urlVariables) {
    test(`${name}: a refused value is quoted without its password`, () => {
      for (const value of REFUSED) {
        assert.throws(
          () => loadEnv({ [name]: variable }, { [name]: value }),
          (err) => {
            assert.ok(err instanceof ConfigError);
            assert.equal(err.variable, name);
            for (const secret of SECRETS)
              assert.ok(!err.message.includes(secret), `${name}: ${err.message}`);
            assert.match(err.message, /\*\*\*/, 'the value is still shown, redacted');
            return true;
          },
        );
      }
    });
  }
});
