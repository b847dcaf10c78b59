// `node --test --import ./test/support/blocking-stdout.js …` (scripts/test.js): every test file's
// process writes its verdicts to the runner over stdout, a pipe, and --test-force-exit ends the
// process as soon as its tests are done. On Linux a pipe write is asynchronous, so the exit could
// drop verdicts still buffered: the runner then counted fewer tests than ran, and a failure's name
// and error were lost (the run still failed, by the exit code). Node's own fix is not released
// (https://github.com/nodejs/node/issues/64833). A blocking pipe has written everything by the time
// write() returns, so nothing is left for the exit to drop.
const handle = /** @type {{ _handle?: { setBlocking?: (blocking: boolean) => void } }} */ (/** @type {unknown} */ (process.stdout))._handle;
if (typeof handle?.setBlocking === 'function') handle.setBlocking(true);
