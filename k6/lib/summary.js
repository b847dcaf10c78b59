import { SUMMARY_FILE } from './config.js';

/** @param {number} ms */
const fmt = (ms) => (ms === undefined ? '-' : ms >= 1000 ? `${(ms / 1000).toFixed(2)}s` : `${ms.toFixed(1)}ms`);

/**
 * The end-of-test summary: a short text one on stdout, and the full data as JSON in
 * SUMMARY_FILE (default: <test>-summary.json in the working directory).
 * @param {string} testName
 */
export function summaryHandler(testName) {
  return (/** @type {any} */ data) => {
    const m = data.metrics;
    const seconds = data.state.testRunDurationMs / 1000;
    const d = m.http_req_duration?.values ?? {};
    const items = m.inserted_items?.values.count ?? 0;
    const failedThresholds = Object.entries(m)
      .flatMap(([name, metric]) => Object.entries(/** @type {any} */ (metric).thresholds ?? {}).filter(([, t]) => !t.ok).map(([expr]) => `${name} ${expr}`));
    const lines = [
      '',
      `${testName}: ${items} users inserted in ${seconds.toFixed(1)} s = ${(items / seconds).toFixed(0)} items/s`,
      `  requests: ${m.http_reqs?.values.count ?? 0} (${(m.http_reqs?.values.rate ?? 0).toFixed(1)}/s), failed: ${((m.http_req_failed?.values.rate ?? 0) * 100).toFixed(2)}%`,
      `  latency: p50 ${fmt(d.med)}  p95 ${fmt(d['p(95)'])}  p99 ${fmt(d['p(99)'])}  max ${fmt(d.max)}`,
      `  thresholds: ${failedThresholds.length ? `FAILED ${failedThresholds.join('; ')}` : 'all passed'}`,
      '',
    ];
    return {
      stdout: lines.join('\n'),
      [SUMMARY_FILE || `${testName}-summary.json`]: JSON.stringify(data, null, 2),
    };
  };
}
