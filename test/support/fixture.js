import { after, before } from 'node:test';
import { startTestApp } from './app.js';
import { createTestDatabase } from './database.js';

/**
 * For the enclosing describe(): a fresh database and the service's app on it, started before the
 * tests and torn down after. Read them from the returned object inside tests.
 * @param {Record<string, string>} [env]
 */
export function useAppAndDatabase(env = {}) {
  const ctx = {
    /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ db: /** @type {any} */ (undefined),
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
