import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidArgumentError, listOf, wholeNumber } from '../../src/command-line.js';

describe('the command line', () => {
  test('listOf: a comma-separated list of known items; an unknown one is named', () => {
    const variants = listOf(['default', 'unnest', 'copy']);
    assert.deepEqual(variants('copy, default'), ['copy', 'default']);
    assert.throws(
      () => variants('copy,defualt'),
      (err) =>
        err instanceof InvalidArgumentError &&
        /Unknown: defualt\. Expected one or more of default, unnest, copy/.test(err.message),
    );
    assert.throws(() => variants(','), InvalidArgumentError);
  });

  test('wholeNumber: digits only, at least the minimum', () => {
    assert.equal(wholeNumber(1)('12'), 12);
    assert.equal(wholeNumber(0)('0'), 0);
    for (const bad of ['0', '1.5', '-3', '3x', ''])
      assert.throws(() => wholeNumber(1)(bad), InvalidArgumentError, bad);
  });
});
