import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import {
  ConfigError,
  boolean,
  defineVariables,
  describeEnv,
  environmentHelp,
  integer,
  loadEnv,
  matching,
  milliseconds,
  oneOf,
  text,
  url,
} from '@sluice/env';

const DECLARED = defineVariables({
  PORT: { parser: integer({ min: 0, max: 65535 }), default: 3000, description: 'port' },
  TARGET: {
    parser: url({ protocols: ['http', 'https'], trimSlashes: true }),
    required: true,
    description: 'where to send',
  },
  MODE: { parser: oneOf(/** @type {const} */ (['a', 'b'])), default: 'a', description: 'mode' },
  FAST: { parser: boolean, default: false, description: 'go fast' },
  TOKEN: { parser: text({ trim: false }), description: 'secret' },
  WAIT_MS: { parser: milliseconds({ min: 1, max: 1000 }), default: 10, description: 'wait' },
});

describe('loadEnv (unit)', () => {
  test('defaults when unset or blank; values parsed, trimmed except where declared otherwise', () => {
    assert.deepEqual(loadEnv(DECLARED, { TARGET: 'http://x/' }), {
      PORT: 3000,
      TARGET: 'http://x',
      MODE: 'a',
      FAST: false,
      TOKEN: undefined,
      WAIT_MS: 10,
    });
    assert.deepEqual(
      loadEnv(DECLARED, {
        TARGET: ' https://y//',
        PORT: ' 0 ',
        MODE: ' b',
        FAST: 'ON',
        TOKEN: ' t ',
        WAIT_MS: '   ',
      }),
      { PORT: 0, TARGET: 'https://y', MODE: 'b', FAST: true, TOKEN: ' t ', WAIT_MS: 10 },
    );
  });

  test('every problem at once, in one ConfigError naming the first variable', () => {
    assert.throws(
      () => loadEnv(DECLARED, { PORT: '70000', MODE: 'c', FAST: 'maybe', WAIT_MS: '0' }),
      (err) => {
        assert.ok(err instanceof ConfigError);
        assert.equal(err.variable, 'PORT');
        assert.deepEqual(
          err.problems.map((p) => p.variable),
          ['PORT', 'TARGET', 'MODE', 'FAST', 'WAIT_MS'],
        );
        assert.match(
          err.message,
          /^PORT must be between 0 and 65535, got 70000; TARGET is required; MODE must be one of a, b, got "c"; /,
        );
        return true;
      },
    );
  });

  test("a component's rules add their problems to the same error", () => {
    const rules = (/** @type {any} */ v) =>
      v.TOKEN && v.FAST ? [{ variable: 'TOKEN', problem: 'and FAST exclude each other' }] : [];
    assert.throws(
      () => loadEnv(DECLARED, { TARGET: 'http://x', TOKEN: 't', FAST: 'on' }, rules),
      /^ConfigError: TOKEN and FAST exclude each other$/,
    );
  });

  test('integer: digits only within bounds, for any text', () => {
    const parser = integer({ min: 5, max: 50 });
    fc.assert(
      fc.property(fc.string(), (s) => {
        /** @type {number | undefined} */
        let value;
        try {
          value = parser.parse(s);
        } catch (err) {
          assert.ok(err instanceof TypeError);
          return !/^\s*\d+\s*$/.test(s) || Number(s) < 5 || Number(s) > 50;
        }
        return /^\s*\d+\s*$/.test(s) && value === Number(s.trim()) && value >= 5 && value <= 50;
      }),
    );
  });

  test('url and matching refuse what they do not accept, saying what they want', () => {
    assert.throws(
      () => url({ protocols: ['postgres'] }).parse('mysql://x'),
      /must be a URL \(postgres:\/\/\), got "mysql:\/\/x"/,
    );
    assert.throws(() => url({ protocols: ['http'] }).parse('not a url'), TypeError);
    assert.throws(() => matching(/^arn:/, 'an ARN').parse('x'), /must be an ARN, got "x"/);
  });

  test('describeEnv and environmentHelp say each default, kind and meaning', () => {
    assert.deepEqual(
      describeEnv(DECLARED).map((d) => [d.name, d.defaultText]),
      [
        ['PORT', '3000'],
        ['TARGET', 'required'],
        ['MODE', 'a'],
        ['FAST', 'off'],
        ['TOKEN', 'unset'],
        ['WAIT_MS', '10'],
      ],
    );
    assert.equal(
      environmentHelp(DECLARED).WAIT_MS,
      'wait; a whole number from 1 to 1000 (milliseconds) (default: 10)',
    );
    assert.equal(
      environmentHelp(DECLARED).TARGET,
      'where to send; a URL (http:// or https://) (required)',
    );
  });
});
