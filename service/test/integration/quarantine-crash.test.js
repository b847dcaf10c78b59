// PostgreSQL killed during a quarantining import, after the import kept some of its items (inside its
// transaction): neither its rows nor its items survive, the client is told so, and the service
// serves again once PostgreSQL is back.
import assert from 'node:assert/strict';
import http from 'node:http';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { migrate } from '@sluice/db/migrate';
import { startLocalPostgres, tempDataDir } from '@sluice/db/local-postgres';
import pg from 'pg';
import { isAlive, postmasterPid } from '../../../test/support/postgres-process.js';
import { startServerProcess } from '../../../test/support/server-process.js';
import { makeUsers, uniqueTag } from '../../../test/support/users.js';
import { waitUntil } from '../../../test/support/wait.js';

describe('PostgreSQL killed during a quarantining import', () => {
  /** @type {Awaited<ReturnType<typeof startLocalPostgres>>} */ let server;
  /** @type {Awaited<ReturnType<typeof startServerProcess>>} */ let service;
  /** @type {string} */ let dataDir;
  before(async () => {
    dataDir = await tempDataDir();
    server = await startLocalPostgres({ dataDir, persistent: true });
    await migrate(server.url);
    service = await startServerProcess({
      DATABASE_URL: server.url,
      DB_CONNECT_TIMEOUT_MS: '1000',
      STREAM_IDLE_TIMEOUT_MS: '5000',
      LOG_LEVEL: 'warn',
    });
  });
  after(async () => {
    await service?.stop();
    await server?.stop().catch(() => {});
    await rm(path.dirname(dataDir), { recursive: true, force: true });
  });

  test('its items already kept in the transaction and its rows are both gone; the answer says nothing was written', async () => {
    const tag = uniqueTag();
    // Over 256 KiB of invalid items first: kept at the first chunk's end, inside the transaction.
    const early = Array.from({ length: 6 }, (_, i) =>
      JSON.stringify({ email: `early-${tag}-${i}`, name: 'x'.repeat(60_000) }),
    );
    const users = makeUsers(20_000, tag).map((u) => JSON.stringify(u));
    const answer = new Promise((resolve) => {
      const req = http.request(`${service.baseUrl}/users`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-ndjson',
          prefer: 'invalid=quarantine',
          'transfer-encoding': 'chunked',
        },
      });
      req.on('error', (err) => resolve({ status: 0, text: String(err) }));
      req.on('response', (res) => {
        let text = '';
        res.on('data', (c) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode, text }));
      });
      // The body's end is never sent: the import stays open until PostgreSQL dies under it.
      req.write(`${[...early, ...users].join('\n')}\n`);
    });

    const admin = new pg.Client(server.url);
    await admin.connect();
    const keptInside = async () =>
      (
        await admin.query(
          "SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'quarantined_items' AND l.pid <> pg_backend_pid()",
        )
      ).rows[0].n > 0;
    await waitUntil(
      keptInside,
      'the import to have kept items in its open transaction',
      30_000,
      20,
    );
    await admin.end();

    const pid = await postmasterPid(server.dataDir);
    process.kill(pid, 'SIGQUIT');
    const { status, text } = /** @type {{ status: number, text: string }} */ (await answer);
    // The import waits for its body when PostgreSQL dies: it learns so at its next statement, or
    // its body's idle timeout ends it first; either way it says nothing was written.
    assert.ok([408, 503].includes(status), `${status} ${text}`);
    assert.match(JSON.parse(text).message, /nothing was written/);
    await waitUntil(() => !isAlive(pid), 'PostgreSQL to exit', 10_000, 20);
    await server.start();

    const db = new pg.Client(server.url);
    await db.connect();
    try {
      assert.equal(
        (await db.query('SELECT count(*)::int AS n FROM users WHERE email LIKE $1', [`%${tag}%`]))
          .rows[0].n,
        0,
        'no row of the import',
      );
      assert.equal(
        (
          await db.query('SELECT count(*)::int AS n FROM quarantined_items WHERE item LIKE $1', [
            `%${tag}%`,
          ])
        ).rows[0].n,
        0,
        'no item of it',
      );
    } finally {
      await db.end();
    }
    await waitUntil(
      async () =>
        (
          await fetch(`${service.baseUrl}/users`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(makeUsers(1)),
          })
        ).status === 201,
      'it serves again',
      30_000,
    );
  });
});
