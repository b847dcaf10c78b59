// Arrays of one user: ramps to 5000 VUs over 10 s, each sleeping 1 s between requests.
// k6 run k6/stress-test-one.js   (BASE_URL, TOKEN, VUS, DURATION, MODE=capacity, P95_MS, SUMMARY_FILE)
import { scenario } from './lib/config.js';
import { postBatch, thresholds } from './lib/ingest.js';
import { summaryHandler } from './lib/summary.js';

export const options = {
  scenarios: { one: scenario({ vus: 5000, duration: '10s', rampUp: true }) },
  // 5000 VUs at one request a second is more than a 2-core machine running k6, the service and
  // PostgreSQL can serve, by design: latency grows while every request still succeeds. The bound
  // catches a service that stalls, not one that is merely saturated.
  thresholds: thresholds(10_000),
  summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(90)', 'p(95)', 'p(99)'],
};

export default function () {
  postBatch(1);
}

export const handleSummary = summaryHandler('stress-test-one');
