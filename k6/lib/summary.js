import { SUMMARY_FILE } from './config.js';

/** @param {number} ms */
const fmt = (ms) =>
  ms === undefined ? '-' : ms >= 1000 ? `${(ms / 1000).toFixed(2)}s` : `${ms.toFixed(1)}ms`;

/**
 * The test's own figures: users inserted per second, requests, latency, thresholds.
 * @param {string} testName @param {any} data  what k6 hands to handleSummary
 */
function figures(testName, data) {
  const m = data.metrics;
  const seconds = data.state.testRunDurationMs / 1000;
  const d = m.http_req_duration?.values ?? {};
  const items = m.inserted_items?.values.count ?? 0;
  const failedThresholds = Object.entries(m).flatMap(([name, metric]) =>
    Object.entries(/** @type {any} */ (metric).thresholds ?? {})
      .filter(([, t]) => !t.ok)
      .map(([expr]) => `${name} ${expr}`),
  );
  return [
    `${testName}: ${items} users inserted in ${seconds.toFixed(1)} s = ${(items / seconds).toFixed(0)} items/s`,
    `  requests: ${m.http_reqs?.values.count ?? 0} (${(m.http_reqs?.values.rate ?? 0).toFixed(1)}/s), failed: ${((m.http_req_failed?.values.rate ?? 0) * 100).toFixed(2)}%`,
    `  latency: p50 ${fmt(d.med)}  p95 ${fmt(d['p(95)'])}  p99 ${fmt(d['p(99)'])}  max ${fmt(d.max)}`,
    `  thresholds: ${failedThresholds.length ? `FAILED ${failedThresholds.join('; ')}` : 'all passed'}`,
  ];
}

/**
 * handleSummary for both tests. k6 prints its standard end-of-test summary only when handleSummary
 * returns nothing (k6 v1.8.1, internal/js/summary-wrapper.js); a script has no other way to reach
 * that text, and no way to write a file but handleSummary's return value. So:
 * - by default it returns nothing: k6's own summary on stdout (and --summary-export works as k6
 *   documents), with the test's figures logged just before it; no file is written;
 * - with SUMMARY_FILE it writes k6's summary data there as JSON, and the figures go to stdout in
 *   place of k6's summary (the bench and the smoke test read that file).
 * @param {string} testName
 */
export function summaryHandler(testName) {
  return (/** @type {any} */ data) => {
    const lines = figures(testName, data);
    if (!SUMMARY_FILE) {
      console.log(lines.map((l) => l.trim()).join('; '));
      return undefined;
    }
    return { stdout: `\n${lines.join('\n')}\n\n`, [SUMMARY_FILE]: JSON.stringify(data, null, 2) };
  };
}
