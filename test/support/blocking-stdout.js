// Preloaded in every test file's process (scripts/test.js): its stdout is a pipe to the runner, and
// on Linux a pipe write is asynchronous, so a process that exits (a test calling process.exit, the
// file reporter ending a process that lingers) could drop what it had printed. A blocking pipe has
// written everything by the time write() returns (https://github.com/nodejs/node/issues/64833).
const handle = /** @type {{ _handle?: { setBlocking?: (blocking: boolean) => void } }} */ (
  /** @type {unknown} */ (process.stdout)
)._handle;
if (typeof handle?.setBlocking === 'function') handle.setBlocking(true);
