import { after, before } from 'node:test';
import { startTestApp } from './app.js';
import { createTestDatabase } from './database.js';
import { startToxiproxy } from './toxiproxy.js';

/**
 * For the enclosing describe(): a fresh database and the service's app on it, started before the
 * tests and torn down after. Read them from the returned object inside tests.
 * @param {Record<string, string>} [env]
 */
export function useAppAndDatabase(env = {}) {
  const ctx = {
    /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ db: /** @type {any} */ (
      undefined
    ),
    /** @type {Awaited<ReturnType<typeof startTestApp>>} */ app: /** @type {any} */ (undefined),
  };
  before(async () => {
    ctx.db = await createTestDatabase();
    ctx.app = await startTestApp({ databaseUrl: ctx.db.url, env });
  });
  after(async () => {
    await ctx.app?.close();
    await ctx.db?.drop();
  });
  return ctx;
}

/**
 * For the enclosing describe(): a fresh database, a Toxiproxy proxy in front of it, and the
 * service's app connected through the proxy (so a test can cut or stall what goes between them),
 * started before the tests and torn down after. Read them from the returned object inside tests.
 * @param {Record<string, string>} [env]
 */
export function useAppBehindToxiproxy(env = {}) {
  const ctx = {
    /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ db: /** @type {any} */ (
      undefined
    ),
    /** @type {Awaited<ReturnType<typeof startToxiproxy>>} */ toxiproxy: /** @type {any} */ (
      undefined
    ),
    /** @type {import('./toxiproxy.js').Proxy} */ proxy: /** @type {any} */ (undefined),
    /** @type {Awaited<ReturnType<typeof startTestApp>>} */ app: /** @type {any} */ (undefined),
  };
  before(async () => {
    ctx.db = await createTestDatabase();
    ctx.toxiproxy = await startToxiproxy();
    const direct = new URL(ctx.db.url);
    ctx.proxy = await ctx.toxiproxy.proxy('postgres', `${direct.hostname}:${direct.port}`);
    const proxied = new URL(ctx.db.url);
    proxied.host = ctx.proxy.listen;
    ctx.app = await startTestApp({ databaseUrl: proxied.toString(), env });
  });
  after(async () => {
    await ctx.app?.close();
    await ctx.toxiproxy?.stop();
    await ctx.db?.drop();
  });
  return ctx;
}
