import { check, sleep } from 'k6';
import http from 'k6/http';
import { Counter, Rate } from 'k6/metrics';
import { BASE_URL, MODE, RUN_ID, TOKEN } from './config.js';

export const insertedItems = new Counter('inserted_items');
export const successfulRequests = new Rate('successful_requests');

const params = {
  headers: { 'Content-Type': 'application/json', ...(TOKEN ? { Authorization: `Bearer ${TOKEN}` } : {}) },
  tags: { name: 'POST /users' },
  timeout: '60s',
};

/**
 * Users whose emails no other iteration of any run shares: run id, VU, iteration, index.
 * @param {number} size
 */
export function makeBatch(size) {
  const users = new Array(size);
  for (let i = 0; i < size; i++) {
    users[i] = { email: `k6-${RUN_ID}-${__VU}-${__ITER}-${i}@load.test`, name: `Load ${__VU}.${__ITER}.${i}`, phone: '+15550100100' };
  }
  return JSON.stringify(users);
}

/**
 * One iteration: POST a batch of `size` users, count what the service says it inserted, then
 * (in the default closed mode) sleep 1 s like the reference experiment.
 * @param {number} size
 */
export function postBatch(size) {
  const res = http.post(`${BASE_URL}/users`, makeBatch(size), params);
  let inserted = 0;
  if (res.status === 201 || res.status === 200) {
    try {
      inserted = res.json('inserted');
    } catch (_) {
      inserted = 0;
    }
  }
  const ok = check(res, {
    'status is 201': (r) => r.status === 201,
    'every user inserted': () => inserted === size,
  });
  successfulRequests.add(ok);
  insertedItems.add(inserted);
  if (MODE !== 'capacity') sleep(1);
}

/** Thresholds that make k6 exit non-zero when the service misbehaves. @param {string} p95 */
export function thresholds(p95) {
  return {
    http_req_failed: ['rate<0.01'],
    successful_requests: ['rate>0.99'],
    http_req_duration: [`p(95)<${p95}`],
  };
}
