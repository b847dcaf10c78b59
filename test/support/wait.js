/**
 * Waits for a state only polling can see (a row count, a queue depth, a metric, a log line kept in
 * an array), checking every `everyMs`; fails the test saying what it waited for once `timeoutMs`
 * has passed. Not a pause: it returns as soon as the state is there.
 * @param {() => boolean | Promise<boolean>} check
 * @param {string} what
 */
export async function waitUntil(check, what, timeoutMs = 60_000, everyMs = 250) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
