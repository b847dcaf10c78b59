import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ApiError } from '../../src/errors.js';
import { resolutionPreference } from '../../src/http/prefer.js';

describe('the Prefer header (RFC 7240) (unit)', () => {
  test('no header, or no resolution in it: ignore, and nothing to announce', () => {
    assert.deepEqual(resolutionPreference(undefined), { resolution: 'ignore' });
    assert.deepEqual(resolutionPreference('return=minimal, wait=5'), { resolution: 'ignore' });
  });

  test('merge-duplicates and ignore-duplicates, among other preferences, any case, with parameters', () => {
    assert.deepEqual(resolutionPreference('return=minimal, Resolution=merge-duplicates;x=1'), { resolution: 'merge', applied: 'resolution=merge-duplicates' });
    assert.deepEqual(resolutionPreference('resolution="ignore-duplicates"'), { resolution: 'ignore', applied: 'resolution=ignore-duplicates' });
  });

  test('the first resolution counts (two Prefer headers arrive joined with a comma)', () => {
    assert.equal(resolutionPreference('resolution=merge-duplicates, resolution=ignore-duplicates').resolution, 'merge');
  });

  test('another resolution is refused, naming the values there are', () => {
    for (const header of ['resolution=overwrite', 'resolution', 'resolution=', 'resolution=MERGE-DUPLICATES']) {
      assert.throws(() => resolutionPreference(header), (/** @type {any} */ err) => {
        assert.ok(err instanceof ApiError);
        assert.equal(err.code, 'unsupported_preference');
        assert.match(err.message, /merge-duplicates or resolution=ignore-duplicates/);
        return true;
      });
    }
  });
});
