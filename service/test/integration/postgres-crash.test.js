import assert from 'node:assert/strict';
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { migrate } from '@sluice/db/migrate';
import { startLocalPostgres, tempDataDir } from '@sluice/db/local-postgres';
import pg from 'pg';
import { startServerProcess } from '../../../test/support/server-process.js';
import { makeUsers, uniqueTag } from '../../../test/support/users.js';

const CRASHES = 5;
const LOAD_MS = 1_500;
const SINGLE_CLIENTS = 200;
const BATCH_CLIENTS = 4;

/** @param {number} pid */
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

// A crash, a failover or a cut network, many times, under heavy load of both kinds: the service
// stays up, answers 503 meanwhile, recovers by itself, and loses nothing it acknowledged.
describe('PostgreSQL crashing under load, again and again', () => {
  /** @type {Awaited<ReturnType<typeof startLocalPostgres>>} */ let server;
  /** @type {Awaited<ReturnType<typeof startServerProcess>>} */ let service;
  /** @type {string} */ let dataDir;
  before(async () => {
    dataDir = await tempDataDir();
    server = await startLocalPostgres({ dataDir, persistent: true });
    await migrate(server.url);
    service = await startServerProcess({ DATABASE_URL: server.url, DB_CONNECT_TIMEOUT_MS: '1000', LOG_LEVEL: 'warn' });
  });
  after(async () => {
    await service?.stop();
    await server?.stop().catch(() => {});
    await rm(path.dirname(dataDir), { recursive: true, force: true });
  });

  test(`${CRASHES} immediate shutdowns of PostgreSQL under ${SINGLE_CLIENTS} single-user and ${BATCH_CLIENTS} batch clients`, async () => {
    /** @type {Set<string>} */ const acknowledged = new Set();
    const statuses = new Map();
    /** @type {string[]} */ const problems = [];
    let stop = false;

    /** @param {number} size */
    async function client(size) {
      while (!stop) {
        const users = makeUsers(size, uniqueTag());
        try {
          const res = await fetch(`${service.baseUrl}/users`, {
            method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(users),
          });
          const body = await res.text();
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          if (res.status === 201) for (const u of users) acknowledged.add(u.email);
          else if (res.status === 503) {
            if (!res.headers.get('retry-after')) problems.push('503 without Retry-After');
            await sleep(50);
          } else problems.push(`${res.status}: ${body.slice(0, 200)}`);
        } catch (err) {
          problems.push(`request failed: ${/** @type {Error} */ (err).cause ?? err}`);
          await sleep(50);
        }
      }
    }
    const clients = [
      ...Array.from({ length: SINGLE_CLIENTS }, () => client(1)),
      ...Array.from({ length: BATCH_CLIENTS }, () => client(200)),
    ];

    try {
      for (let crash = 0; crash < CRASHES; crash++) {
        await sleep(LOAD_MS);
        const pid = Number((await readFile(path.join(server.dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
        process.kill(pid, 'SIGQUIT'); // what pg_ctl -m immediate sends: no clean goodbye to clients
        while (alive(pid)) await sleep(20);
        await sleep(300);
        assert.equal(service.child.exitCode, null, `the service exited after crash ${crash + 1}`);
        await server.start();
      }
      await sleep(LOAD_MS);
    } finally {
      stop = true;
      await Promise.all(clients);
    }

    assert.equal(service.child.exitCode, null, 'the service process is still up');
    assert.deepEqual(problems.slice(0, 10), [], 'every answer was 201 or 503 with Retry-After');
    assert.ok((statuses.get(503) ?? 0) > 0, 'the outages were seen as 503');
    assert.ok((statuses.get(201) ?? 0) > 0);

    const db = new pg.Client(server.url);
    await db.connect();
    try {
      const { rows } = await db.query('SELECT email FROM users WHERE email = ANY($1)', [[...acknowledged]]);
      assert.equal(rows.length, acknowledged.size, 'every acknowledged user is stored');
    } finally {
      await db.end();
    }
    const res = await fetch(`${service.baseUrl}/users`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(makeUsers(1)) });
    assert.equal(res.status, 201, 'it serves again');
  });
});
