import { Writable } from 'node:stream';
import { createApp } from '../../service/src/app.js';
import { startAuthentication } from '../../service/src/auth/start-auth.js';
import { loadConfig } from '../../service/src/config.js';
import { createDatabase } from '../../service/src/db/database.js';
import { createHttpServer } from '../../service/src/http/node-server.js';
import { createLogger } from '../../service/src/logger.js';
import { createMetrics } from '../../service/src/metrics.js';

/**
 * The service's app on 127.0.0.1, port 0, in this process, with its log lines kept for assertions.
 * @param {{ databaseUrl: string, env?: Record<string, string>, serverTimeouts?: Parameters<typeof createHttpServer>[1],
 *   secrets?: import('../../service/src/auth/token-source.js').SecretReader }} options
 *   secrets: where INGEST_TOKENS_SECRET_ARN is read (a stand-in of Secrets Manager)
 */
export async function startTestApp({ databaseUrl, env = {}, serverTimeouts, secrets }) {
  const config = loadConfig({ DATABASE_URL: databaseUrl, LOG_LEVEL: 'info', ...env });
  /** @type {any[]} */
  const logs = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line) logs.push(JSON.parse(line));
      done();
    },
  });
  const logger = createLogger(config, sink);
  const db = createDatabase({ ...config, databaseUrl }, logger);
  const metrics = createMetrics(db);
  const auth = await startAuthentication(config.auth, { logger, secrets });
  const app = createApp({ config, db, logger, metrics, auth });
  // Served as server.js serves it: the same HTTP server hooks (http/node-server.js).
  const server = createHttpServer(app, serverTimeouts);
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const { port } = /** @type {import('node:net').AddressInfo} */ (server.address());
  const baseUrl = `http://127.0.0.1:${port}`;

  return {
    baseUrl,
    logs,
    config,
    auth,
    metrics,
    /** One round of the quarantine's purge now (the app runs it by itself too). @returns {Promise<number>} */
    purgeQuarantine: () => app.locals.quarantinePurge.round(),
    /**
     * @param {unknown} body  serialised as JSON unless a string or bytes (sent as they are)
     * @param {{ token?: string, contentType?: string, headers?: Record<string, string>, path?: string }} [options]
     *   path: the path and query posted to (/users)
     */
    async postUsers(
      body,
      { token, contentType = 'application/json', headers = {}, path = '/users' } = {},
    ) {
      const res = await fetch(`${baseUrl}${path}`, {
        method: 'POST',
        headers: {
          'content-type': contentType,
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...headers,
        },
        body:
          typeof body === 'string' || body instanceof Uint8Array
            ? /** @type {any} */ (body)
            : JSON.stringify(body),
      });
      const text = await res.text();
      let json;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      return { status: res.status, headers: res.headers, body: json, text };
    },
    async close() {
      auth.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await app.locals.sharedRates.close();
      await db.close();
    },
  };
}
