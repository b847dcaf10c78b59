import http from 'node:http';
import { percentile } from './stats.js';

// One client of the flood benchmark: `connections` loops, each posting batches of `users` new users
// as fast as it is answered, never backing off (a backfill, a producer stuck retrying). Bodies come
// from one template per client, a request's number written over a fixed-width marker, so that the
// load generator's own CPU stays small beside the service's.

const MARK = '00000000';

/**
 * Bodies of `users` new users each, a request's number written over a marker: the next one's.
 * @param {string} tag @param {number} users
 */
export function bodyTemplate(tag, users) {
  const parts = [];
  for (let i = 0; i < users; i++)
    parts.push(
      `{"email":"flood-${tag}-${MARK}-${i}@load.test","name":"Flood ${tag} ${i}","phone":"+15550100100"}`,
    );
  const text = `[${parts.join(',')}]`;
  const buffer = Buffer.from(text);
  const offsets = [];
  for (let at = buffer.indexOf(MARK); at !== -1; at = buffer.indexOf(MARK, at + MARK.length))
    offsets.push(at);
  let sent = 0;
  return () => {
    const body = Buffer.allocUnsafe(buffer.length);
    buffer.copy(body);
    const mark = Buffer.from(String(sent++).padStart(MARK.length, '0'), 'latin1');
    for (const at of offsets) for (let j = 0; j < mark.length; j++) body[at + j] = mark[j];
    return body;
  };
}

/**
 * Runs until `signal` aborts; answers what it saw (and each request's milliseconds, when asked).
 * @param {{ baseUrl: string, token?: string, tag: string, users: number, connections: number,
 *   signal: AbortSignal, withLatencies?: boolean }} options
 */
export async function runFloodClient({
  baseUrl,
  token,
  tag,
  users,
  connections,
  signal,
  withLatencies = false,
}) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const nextBody = bodyTemplate(tag, users);
  const url = new URL('/users', baseUrl);
  /** @type {number[]} */ const latencies = [];
  /** @type {number[]} */ const throttled = [];
  /** @type {number[]} */ const throttledOnWire = [];
  /** @type {Record<string, number>} */ const statuses = {};
  let stored = 0;
  const started = performance.now();

  /** @returns {Promise<void>} */
  const post = () =>
    new Promise((resolve) => {
      const body = nextBody();
      const t0 = performance.now();
      let onWire = t0;
      const req = http.request(
        url,
        {
          method: 'POST',
          agent,
          headers: {
            'content-type': 'application/json',
            'content-length': body.length,
            ...(token ? { authorization: `Bearer ${token}` } : {}),
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => {
            const status = String(res.statusCode);
            statuses[status] = (statuses[status] ?? 0) + 1;
            latencies.push(performance.now() - t0);
            if (status === '429') throttled.push(performance.now() - t0);
            if (status === '429') throttledOnWire.push(performance.now() - onWire);
            if (status.startsWith('2')) stored += users;
            resolve();
          });
          res.on('error', () => resolve());
        },
      );
      // Once it has a connection: a request may first wait for one of the agent's own.
      req.once('socket', () => {
        onWire = performance.now();
      });
      req.on('error', (err) => {
        const code = `error:${/** @type {NodeJS.ErrnoException} */ (err).code ?? 'unknown'}`;
        statuses[code] = (statuses[code] ?? 0) + 1;
        resolve();
      });
      req.end(body);
    });

  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (!signal.aborted) await post();
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  const requests = latencies.length;
  const ok = Object.entries(statuses)
    .filter(([s]) => s.startsWith('2'))
    .reduce((n, [, c]) => n + c, 0);
  return {
    tag,
    users,
    connections,
    requests,
    seconds: Math.round(seconds * 10) / 10,
    statuses,
    okShare: requests === 0 ? 0 : ok / requests,
    p50ms: Math.round(percentile(latencies, 0.5) ?? NaN),
    p99ms: Math.round(percentile(latencies, 0.99) ?? NaN),
    requestsPerSecond: Math.round(requests / seconds),
    usersPerSecond: Math.round(stored / seconds),
    ...(throttled.length > 0
      ? {
          p99ms429: Math.round(percentile(throttled, 0.99) ?? NaN),
          p99ms429OnItsConnection: Math.round(percentile(throttledOnWire, 0.99) ?? NaN),
        }
      : {}),
    ...(withLatencies ? { latencies } : {}),
  };
}
