import http from 'node:http';
import { bodyTemplate } from './flood-client.js';

// A client that sends at a set pace rather than as fast as it is answered: a request of `users` new
// users every 1/perSecond s, whether the one before was answered or not (at most `connections` in
// flight; one that finds none free waits for one).

/**
 * Runs `seconds`; answers the statuses seen and the requests sent.
 * @param {{ baseUrl: string, token: string, tag: string, users: number, perSecond: number,
 *   seconds: number, connections?: number }} options
 */
export async function runPacedClient({
  baseUrl,
  token,
  tag,
  users,
  perSecond,
  seconds,
  connections = 16,
}) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const nextBody = bodyTemplate(tag, users);
  const url = new URL('/users', baseUrl);
  /** @type {Record<string, number>} */ const statuses = {};
  /** @type {Promise<void>[]} */ const sent = [];
  const count = Math.round(perSecond * seconds);
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    const due = started + (i * 1000) / perSecond;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    sent.push(post(url, agent, nextBody(), token, statuses));
  }
  await Promise.all(sent);
  agent.destroy();
  return { requests: count, statuses };
}

/**
 * @param {URL} url @param {http.Agent} agent @param {Buffer} body @param {string} token
 * @param {Record<string, number>} statuses
 * @returns {Promise<void>}
 */
function post(url, agent, body, token, statuses) {
  return new Promise((resolve) => {
    const req = http.request(
      url,
      {
        method: 'POST',
        agent,
        headers: {
          'content-type': 'application/json',
          'content-length': body.length,
          authorization: `Bearer ${token}`,
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          const status = String(res.statusCode);
          statuses[status] = (statuses[status] ?? 0) + 1;
          resolve();
        });
        res.on('error', () => resolve());
      },
    );
    req.on('error', (err) => {
      const code = `error:${/** @type {NodeJS.ErrnoException} */ (err).code ?? 'unknown'}`;
      statuses[code] = (statuses[code] ?? 0) + 1;
      resolve();
    });
    req.end(body);
  });
}
