import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { makeUsers } from '../../../test/support/users.js';
import { waitUntil } from '../../../test/support/wait.js';

// The smallest budget (64 KiB: a 60 KiB large share) is less than what one streamed import holds at
// once, so one import open takes the whole large share while it runs.
const SMALL_BUDGET = { ADMISSION_BUDGET_BYTES: String(64 * 1024), LOG_LEVEL: 'warn' };
const NDJSON = 'application/x-ndjson';
const LARGE_SHARE = 60 * 1024;

/** @param {any[]} users */
const ndjson = (users) => users.map((u) => JSON.stringify(u)).join('\n') + '\n';

/** A streamed import whose headers go out at once and whose body is written as the test asks. @param {string} baseUrl */
function openImport(baseUrl) {
  const req = http.request(`${baseUrl}/users`, {
    method: 'POST',
    headers: { 'content-type': NDJSON, 'transfer-encoding': 'chunked' },
    agent: false,
  });
  req.on('error', () => {});
  /** @type {Promise<{ status: number, retryAfter?: string, body: any }>} */
  const answer = new Promise((resolve, reject) => {
    req.on('response', (res) => {
      let text = '';
      res
        .setEncoding('utf8')
        .on('data', (c) => (text += c))
        .on('end', () =>
          resolve({
            status: /** @type {number} */ (res.statusCode),
            retryAfter: res.headers['retry-after'],
            body: text ? JSON.parse(text) : undefined,
          }),
        );
    });
    req.on('close', () => reject(new Error('closed without an answer')));
  });
  answer.catch(() => {});
  req.flushHeaders();
  return { req, answer };
}

/** @param {string} baseUrl @param {string} line */
async function metricValue(baseUrl, line) {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
}

describe('admission of streamed imports: one holds the large share while it runs (ADMISSION_WAIT_MS=0)', () => {
  const ctx = useAppAndDatabase({ ...SMALL_BUDGET, ADMISSION_WAIT_MS: '0' });
  const largeInFlight = () =>
    metricValue(ctx.app.baseUrl, 'sluice_admission_in_flight_bytes{lane="large"}');

  test('an import is charged what it holds at once before its body is read; a second gets 503 while the first runs; the budget comes back when it ends', async () => {
    const { baseUrl } = ctx.app;
    const first = makeUsers(20);
    const holder = openImport(baseUrl);
    holder.req.write(ndjson(first.slice(0, 1)));
    await waitUntil(
      async () => (await largeInFlight()) === LARGE_SHARE,
      'the first import admitted, charged the large share',
      5000,
      20,
    );

    try {
      // Of unknown length, it is charged what an import holds at once: no room for it.
      const second = openImport(baseUrl);
      second.req.end(ndjson(makeUsers(2)));
      const refused = await second.answer;
      assert.equal(refused.status, 503, JSON.stringify(refused.body));
      assert.equal(refused.retryAfter, '1');
      assert.equal(refused.body.error, 'overloaded');
      assert.equal(
        await metricValue(baseUrl, 'sluice_admission_shed_total{reason="queue_full"}'),
        1,
      );
    } catch (err) {
      holder.req.destroy();
      throw err;
    }

    holder.req.end(ndjson(first.slice(1)));
    const done = await holder.answer;
    assert.equal(done.status, 201, JSON.stringify(done.body));
    await waitUntil(
      async () => (await largeInFlight()) === 0,
      'the first import released',
      5000,
      20,
    );
    const third = makeUsers(3);
    const again = openImport(baseUrl);
    again.req.end(ndjson(third));
    assert.equal((await again.answer).status, 201);
    assert.equal((await ctx.db.usersByEmail([...first, ...third].map((u) => u.email))).size, 23);
  });

  test('an import whose client leaves mid-body gives its share back: the next one is admitted', async () => {
    const { baseUrl } = ctx.app;
    const holder = openImport(baseUrl);
    holder.req.write(ndjson(makeUsers(1)));
    await waitUntil(
      async () => (await largeInFlight()) === LARGE_SHARE,
      'the import admitted',
      5000,
      20,
    );
    holder.req.destroy();
    await waitUntil(
      async () => (await largeInFlight()) === 0,
      'the abandoned import released',
      5000,
      20,
    );
    const next = openImport(baseUrl);
    next.req.end(ndjson(makeUsers(2)));
    assert.equal((await next.answer).status, 201);
  });
});
