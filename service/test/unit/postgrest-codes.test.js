import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { describe, test } from 'node:test';
import { API_ERRORS } from '../../src/errors.js';

describe("PostgREST's codes (unit)", () => {
  test('docs/api.md maps every error code of the catalogue to its PostgREST code, as the catalogue does', async () => {
    const doc = await readFile(new URL('../../../docs/api.md', import.meta.url), 'utf8');
    const table = doc.slice(doc.indexOf("| `code` | sluice's `error` |"));
    /** @type {Record<string, string>} */
    const documented = {};
    for (const line of table.split('\n').slice(2)) {
      if (!line.startsWith('|')) break;
      const [codes, errors] = line
        .split('|')
        .slice(1, 3)
        .map((cell) => [...cell.replace(/\([^)]*\)/g, '').matchAll(/`([^`]+)`/g)].map((m) => m[1]));
      // A row names one PostgREST code per sluice code when it names as many (55P03, 57014).
      for (const [i, error] of errors.entries())
        documented[error] = codes.length === errors.length ? codes[i] : codes[0];
    }
    assert.deepEqual(
      documented,
      Object.fromEntries(Object.entries(API_ERRORS).map(([code, spec]) => [code, spec.pgrst])),
    );
  });
});
