import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  MAY_RUN_NOTHING,
  mayRunNothingBecause,
  ranNothing,
  ranNothingProblem,
} from '../support/ran-nothing.js';

const NONE = { tests: 0, pass: 0, fail: 0, cancelled: 0, skipped: 0, todo: 0 };
const SOURCE = `import test from 'node:test';\n`;
const MARKED = `${MAY_RUN_NOTHING}the tool it checks is absent on this platform\n${SOURCE}`;
const FILE_REPORTER = path.join(import.meta.dirname, '../support/file-reporter.js');

/** @type {string} */
let dir;
before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-ran-nothing-'));
});
after(() => rm(dir, { recursive: true, force: true }));

/**
 * The counts file-reporter.js writes for a scratch test file run as scripts/test.js runs one (node's
 * own events, not a copy of them). @param {string} name @param {string} source
 */
async function countsOf(name, source) {
  const file = path.join(dir, name);
  const countsFile = `${file}.counts.json`;
  await writeFile(file, source);
  const { NODE_TEST_CONTEXT, ...env } = process.env;
  const run = spawnSync(
    process.execPath,
    [
      '--test',
      '--experimental-test-isolation=none',
      `--test-reporter=${FILE_REPORTER}`,
      '--test-reporter-destination=stderr',
      file,
    ],
    { encoding: 'utf8', timeout: 60_000, env: { ...env, SLUICE_TEST_COUNTS_FILE: countsFile } },
  );
  const { failures, ...counts } = JSON.parse(await readFile(countsFile, 'utf8'));
  return { status: run.status, counts, failures };
}

describe('npm test fails a file in which no test ran, unless it says why (unit)', () => {
  test('a file that registers no test is counted as none (node reports it as one test of its own, passed)', async () => {
    const { status, counts } = await countsOf('none.test.js', SOURCE);
    assert.equal(status, 0);
    assert.deepEqual(counts, NONE);
    assert.match(String(ranNothingProblem(counts, SOURCE)), /no test ran \(it registers no test\)/);
  });

  test('a file whose tests are all skipped or todo ran nothing; one passed, or a file that throws, is another matter', async () => {
    const skipped = await countsOf(
      'skipped.test.js',
      `${SOURCE}test('a', { skip: 'not here' }, () => {});\ntest.todo('b');\n`,
    );
    assert.deepEqual(skipped.counts, { ...NONE, tests: 2, skipped: 1, todo: 1 });
    assert.match(
      String(ranNothingProblem(skipped.counts, SOURCE)),
      /each of its 2 tests was skipped or todo/,
    );
    const one = await countsOf('one.test.js', `${SOURCE}test('a', () => {});\ntest.skip('b');\n`);
    assert.deepEqual(one.counts, { ...NONE, tests: 2, pass: 1, skipped: 1 });
    assert.equal(ranNothingProblem(one.counts, SOURCE), undefined);
    const throws = await countsOf('throws.test.js', `throw new Error('on import');\n`);
    assert.equal(throws.counts.fail, 1, 'a file that throws on import still fails');
    assert.equal(ranNothing(throws.counts), false);
  });

  test('the marker line, indented or not, with a reason, lets it pass; without a reason, or not a line of its own, not', () => {
    assert.equal(ranNothingProblem(NONE, MARKED), undefined);
    assert.equal(
      mayRunNothingBecause(`  ${MAY_RUN_NOTHING}  its tests are generated from a folder\n`),
      'its tests are generated from a folder',
    );
    for (const source of [
      `${MAY_RUN_NOTHING}\n`,
      `${MAY_RUN_NOTHING}why not\n`,
      `const x = 1; ${MAY_RUN_NOTHING}the tool it checks is absent\n`,
      `// sluice-test: may-run-nothing\n`,
    ])
      assert.match(String(ranNothingProblem(NONE, source)), /no test ran/, source);
  });
});
