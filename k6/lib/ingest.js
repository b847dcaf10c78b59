import { check, sleep } from 'k6';
import http from 'k6/http';
import { Counter, Rate } from 'k6/metrics';
import { BASE_URL, CHANGED_AT, MODE, REPLAY, RESOLUTION, RETURN, RUN_ID, TOKEN } from './config.js';

export const insertedItems = new Counter('inserted_items');
export const updatedItems = new Counter('updated_items');
export const sentItems = new Counter('sent_items');
export const successfulRequests = new Rate('successful_requests');

const params = {
  headers: {
    'Content-Type': 'application/json',
    ...(TOKEN ? { Authorization: `Bearer ${TOKEN}` } : {}),
    ...(RESOLUTION === 'merge' || RETURN
      ? {
          Prefer: [
            RESOLUTION === 'merge' ? 'resolution=merge-duplicates' : '',
            RETURN ? 'return=representation, count=exact' : '',
          ]
            .filter(Boolean)
            .join(', '),
        }
      : {}),
  },
  tags: { name: 'POST /users' },
  timeout: '60s',
};

const ITER_MARK = '@ITER@';
const AT_MARK = '@AT@';
const CHANGES_FROM = Date.UTC(2026, 0, 1);
/** @type {Record<string, string>} this VU's body template per batch size and name */
const templates = {};

/**
 * Users whose emails no other iteration of any run shares: run id, VU, iteration, index. The
 * JSON is built once per VU and name, with a marker where the iteration goes; each iteration is
 * then one native replaceAll (two with CHANGED_AT), so the load generator does not eat the CPU the
 * service and database need (each pass over a 1000-user body costs k6 about 0.5 ms).
 * @param {number} size
 * @param {number} [iteration]  whose users: this iteration's unless a replay asks for an earlier one
 * @param {string} [name]  how the names begin ('Load'; a changed replay gives another)
 * @param {boolean} [changed]  with CHANGED_AT: the change is a later one than its iteration's first
 */
export function makeBatch(size, iteration = __ITER, name = 'Load', changed = false) {
  const key = `${size}:${name}`;
  if (!templates[key]) {
    const users = new Array(size);
    for (let i = 0; i < size; i++) {
      users[i] = {
        email: `k6-${RUN_ID}-${__VU}-${ITER_MARK}-${i}@load.test`,
        name: `${name} ${__VU}.${ITER_MARK}.${i}`,
        phone: '+15550100100',
      };
      if (CHANGED_AT) users[i].changedAt = AT_MARK;
    }
    templates[key] = JSON.stringify(users);
  }
  const body = templates[key].replaceAll(ITER_MARK, String(iteration));
  if (!CHANGED_AT) return body;
  // One instant a batch, to the microsecond: a second an iteration, a changed replay a millisecond later.
  const at = new Date(CHANGES_FROM + iteration * 1000 + (changed ? 1 : 0))
    .toISOString()
    .replace('Z', '123Z');
  return body.replaceAll(AT_MARK, at);
}

/**
 * One iteration: POST a batch of `size` users, count what the service says it inserted and
 * updated, then (in the default closed mode) sleep 1 s like the reference experiment. Under
 * REPLAY every odd iteration resends the previous one's users and expects `200` with nothing
 * inserted; a changed replay merged updates every one of them.
 * @param {number} size
 */
export function postBatch(size) {
  const replay = REPLAY !== '' && __ITER % 2 === 1;
  const changed = replay && REPLAY === 'changed';
  const expected = replay ? 0 : size;
  const expectedUpdates = changed && RESOLUTION === 'merge' ? size : 0;
  const res = http.post(
    `${BASE_URL}/users`,
    makeBatch(size, replay ? __ITER - 1 : __ITER, changed ? 'Changed' : 'Load', changed),
    params,
  );
  let inserted = 0;
  let updated = 0;
  if ((res.status === 201 || res.status === 200) && RETURN) {
    // The rows written come back; how many is in Content-Range (*/n), without parsing them.
    const written = Number(String(res.headers['Content-Range'] ?? '').split('/')[1] ?? 0);
    if (changed && RESOLUTION === 'merge') updated = written;
    else inserted = written;
  } else if (res.status === 201 || res.status === 200) {
    try {
      inserted = res.json('inserted');
      // The naive endpoint the bench compares against answers no `updated`: it never updates.
      updated = res.json('updated') ?? 0;
    } catch (_) {
      inserted = 0;
    }
  }
  const ok = check(res, {
    'status is 201 (200 for a replay)': (r) => r.status === (replay ? 200 : 201),
    'every new user inserted, no replayed one': () => inserted === expected,
    'every changed user merged, no other': () => updated === expectedUpdates,
  });
  successfulRequests.add(ok);
  insertedItems.add(inserted);
  updatedItems.add(updated);
  sentItems.add(size);
  if (MODE !== 'capacity') sleep(1);
}

/**
 * Thresholds that make k6 exit non-zero when the service misbehaves: any real share of failed
 * requests, or latencies that say it stopped keeping up. P95_MS overrides the script's p95 bound.
 * @param {number} p95Ms
 */
export function thresholds(p95Ms) {
  return {
    http_req_failed: ['rate<0.01'],
    successful_requests: ['rate>0.99'],
    http_req_duration: [`p(95)<${Number(__ENV.P95_MS || p95Ms)}`],
  };
}
