import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidArgumentError, listOf, variablesReadBy, wholeNumber } from '../../src/command-line.js';

describe('the command line', () => {
  test('listOf: a comma-separated list of known items; an unknown one is named', () => {
    const variants = listOf(['default', 'unnest', 'copy']);
    assert.deepEqual(variants('copy, default'), ['copy', 'default']);
    assert.throws(() => variants('copy,defualt'), (err) => err instanceof InvalidArgumentError && /Unknown: defualt\. Expected one or more of default, unnest, copy/.test(err.message));
    assert.throws(() => variants(','), InvalidArgumentError);
  });

  test('wholeNumber: digits only, at least the minimum', () => {
    assert.equal(wholeNumber(1)('12'), 12);
    assert.equal(wholeNumber(0)('0'), 0);
    for (const bad of ['0', '1.5', '-3', '3x', '']) assert.throws(() => wholeNumber(1)(bad), InvalidArgumentError, bad);
  });

  test('variablesReadBy: every variable a loader reads, in order, with its default; those read only once another is set after it', () => {
    class MissingVariable extends Error {
      /** @param {string} variable */
      constructor(variable) {
        super(`${variable} is required`);
        this.variable = variable;
      }
    }
    /** @param {NodeJS.ProcessEnv} env */
    const load = (env) => {
      let server;
      if (env.SERVER_HOST) {
        if (!env.SERVER_USER) throw new MissingVariable('SERVER_USER');
        server = `${env.SERVER_USER}@${env.SERVER_HOST}:${env.SERVER_PORT ?? 22}`;
      }
      return { server, port: Number(env.PORT ?? 3000), verbose: env.VERBOSE === 'on', token: env.TOKEN };
    };
    assert.deepEqual(variablesReadBy(load), {
      SERVER_HOST: '',
      SERVER_USER: '(read when SERVER_HOST is set)',
      SERVER_PORT: '(read when SERVER_HOST is set)',
      PORT: '(default: 3000)',
      VERBOSE: '(default: off)',
      TOKEN: '(default: unset)',
    });
    assert.throws(() => variablesReadBy((env) => ({ url: new URL(/** @type {string} */ (env.URL)) })), /must accept an empty environment/);
  });
});
