// Arrays of 1000 users: 100 VUs for 10 s, each sleeping 1 s between requests.
// k6 run k6/stress-test-batch.js   (BASE_URL, TOKEN, VUS, DURATION, MODE=capacity, P95_MS, SUMMARY_FILE, RESOLUTION, REPLAY, CHANGED_AT)
import { scenario } from './lib/config.js';
import { postBatch, thresholds } from './lib/ingest.js';
import { summaryHandler } from './lib/summary.js';

export const options = {
  scenarios: { batch: scenario({ vus: 100, duration: '10s', rampUp: false }) },
  thresholds: thresholds(5_000),
  summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(90)', 'p(95)', 'p(99)'],
};

export default function () {
  postBatch(1000);
}

export const handleSummary = summaryHandler('stress-test-batch');
