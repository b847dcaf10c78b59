import { Agent, request } from 'undici';

/**
 * What one HTTP attempt came to. `status` 0 is a network error or a timeout: the request may or may
 * not have reached the service.
 * @typedef {{ status: number, ms: number, retryAfterSeconds?: number, body?: any, error?: string }} Attempt
 */

/**
 * A keep-alive HTTP client for the soak's load generator: at most `connections` sockets, every
 * request bounded in time, so a stuck service shows up as errors instead of a hung generator.
 * @param {string} baseUrl
 * @param {{ connections: number, timeoutMs?: number }} options
 */
export function createSoakClient(baseUrl, { connections, timeoutMs = 30_000 }) {
  const dispatcher = new Agent({
    connections,
    connectTimeout: 5_000,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    keepAliveTimeout: 4_000,
  });

  /**
   * @param {'GET' | 'POST'} method @param {string} path @param {string} [body]
   * @returns {Promise<Attempt & { text?: string }>}
   */
  async function send(method, path, body) {
    const started = performance.now();
    try {
      const res = await request(`${baseUrl}${path}`, {
        method,
        dispatcher,
        body,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        signal: AbortSignal.timeout(timeoutMs),
      });
      // Read the whole body whatever the status, so the socket goes back to the pool.
      const text = await res.body.text();
      const retryAfter = Number(res.headers['retry-after']);
      return {
        status: res.statusCode,
        ms: performance.now() - started,
        text,
        ...(Number.isFinite(retryAfter) && retryAfter >= 0
          ? { retryAfterSeconds: retryAfter }
          : {}),
      };
    } catch (err) {
      const e = /** @type {any} */ (err);
      return {
        status: 0,
        ms: performance.now() - started,
        error: String(e?.code ?? e?.cause?.code ?? e?.name ?? 'network error'),
      };
    }
  }

  return {
    /** POST a JSON text to /users. @param {string} json @returns {Promise<Attempt>} */
    async postUsers(json) {
      const { text, ...attempt } = await send('POST', '/users', json);
      if (text === undefined) return attempt;
      try {
        return { ...attempt, body: JSON.parse(text) };
      } catch {
        return attempt;
      }
    },
    /** The text of a GET, or undefined when it did not answer 200. @param {string} path */
    async getText(path) {
      const res = await send('GET', path);
      return res.status === 200 ? res.text : undefined;
    },
    close: () => dispatcher.close(),
  };
}
