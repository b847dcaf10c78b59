import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { ApiError } from '../../src/errors.js';
import { parsePreferences, resolutionPreference } from '../../src/http/prefer.js';

describe('the Prefer header (RFC 7240) (unit)', () => {
  test('no header, or no resolution in it: ignore, and nothing to announce', () => {
    assert.deepEqual(resolutionPreference(undefined), { resolution: 'ignore' });
    assert.deepEqual(resolutionPreference('return=minimal, wait=5'), { resolution: 'ignore' });
  });

  test('merge-duplicates and ignore-duplicates, among other preferences, any case, with parameters', () => {
    assert.deepEqual(resolutionPreference('return=minimal, Resolution=merge-duplicates;x=1'), {
      resolution: 'merge',
      applied: 'resolution=merge-duplicates',
    });
    assert.deepEqual(resolutionPreference('resolution="ignore-duplicates"'), {
      resolution: 'ignore',
      applied: 'resolution=ignore-duplicates',
    });
  });

  test('two resolutions that differ are refused (two Prefer headers arrive joined with a comma); the same one twice is one', () => {
    for (const header of [
      'resolution=merge-duplicates, resolution=ignore-duplicates',
      'resolution=ignore-duplicates,resolution="merge-duplicates"',
      'resolution=merge-duplicates, return=minimal, Resolution=overwrite',
    ]) {
      assert.throws(
        () => parsePreferences(header),
        (/** @type {any} */ err) => {
          assert.ok(err instanceof ApiError);
          assert.equal(err.code, 'unsupported_preference');
          assert.match(err.message, /resolution is given twice with different values/);
          return true;
        },
      );
    }
    assert.deepEqual(
      resolutionPreference('resolution=merge-duplicates, resolution=merge-duplicates'),
      { resolution: 'merge', applied: 'resolution=merge-duplicates' },
    );
  });

  test('another resolution is refused, naming the values there are', () => {
    for (const header of [
      'resolution=overwrite',
      'resolution',
      'resolution=',
      'resolution=MERGE-DUPLICATES',
    ]) {
      assert.throws(
        () => resolutionPreference(header),
        (/** @type {any} */ err) => {
          assert.ok(err instanceof ApiError);
          assert.equal(err.code, 'unsupported_preference');
          assert.match(err.message, /merge-duplicates or resolution=ignore-duplicates/);
          return true;
        },
      );
    }
  });
});

describe("PostgREST's preferences for writes (unit)", () => {
  test("what postgrest-js sends for .upsert(rows, { count }).select(): every preference honoured, announced in PostgREST's order", () => {
    assert.deepEqual(
      parsePreferences('count=exact, resolution=merge-duplicates, return=representation'),
      {
        resolution: 'merge',
        return: 'representation',
        count: true,
        applied: 'resolution=merge-duplicates, return=representation, count=exact',
      },
    );
  });

  test('return: minimal, headers-only, representation; another value is ignored', () => {
    for (const value of ['minimal', 'headers-only', 'representation']) {
      assert.deepEqual(parsePreferences(`return=${value}`), {
        resolution: 'ignore',
        return: value,
        count: false,
        applied: `return=${value}`,
      });
    }
    assert.deepEqual(parsePreferences('return=everything'), {
      resolution: 'ignore',
      return: undefined,
      count: false,
      applied: undefined,
    });
  });

  test('count: exact, planned and estimated all count exactly (a write knows); another value is ignored', () => {
    assert.equal(parsePreferences('count=planned').count, true);
    assert.equal(parsePreferences('count=planned').applied, 'count=planned');
    assert.equal(parsePreferences('count=none').count, false);
  });

  test('preferences sluice does not honour are ignored (RFC 7240), and not announced', () => {
    assert.deepEqual(
      parsePreferences(
        'tx=rollback, missing=default, timezone=UTC, max-affected=5, respond-async, wait=10',
      ),
      { resolution: 'ignore', return: undefined, count: false, applied: undefined },
    );
  });

  test('handling=strict refuses them, as PostgREST does (PGRST122), naming each', () => {
    assert.throws(
      () => parsePreferences('handling=strict, foo, bar, return=minimal'),
      (/** @type {any} */ err) => {
        assert.equal(err.code, 'unsupported_preference');
        assert.equal(err.message, 'Invalid preferences given with handling=strict');
        assert.equal(err.details, 'Invalid preferences: foo, bar');
        return true;
      },
    );
    assert.deepEqual(parsePreferences('handling=strict, return=minimal'), {
      resolution: 'ignore',
      return: 'minimal',
      count: false,
      applied: 'return=minimal, handling=strict',
    });
    assert.equal(parsePreferences('handling=lenient, foo').applied, undefined);
  });

  test('any header: parsed or refused as unsupported_preference, never another failure', () => {
    fc.assert(
      fc.property(
        fc.string({
          unit: fc.constantFrom(
            'r',
            'e',
            't',
            'u',
            'n',
            '=',
            ',',
            ';',
            ' ',
            '"',
            'x',
            'a',
            'c',
            'o',
            'h',
            'd',
            'l',
            'i',
            's',
          ),
        }),
        (header) => {
          try {
            const p = parsePreferences(header);
            assert.ok(p.resolution === 'ignore' || p.resolution === 'merge');
          } catch (err) {
            assert.ok(
              err instanceof ApiError && err.code === 'unsupported_preference',
              String(err),
            );
          }
        },
      ),
    );
  });
});
