import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { migrate } from '@sluice/db/migrate';
import { startLocalPostgres, tempDataDir } from '@sluice/db/local-postgres';
import pg from 'pg';
import { isAlive, postmasterPid } from '../../../test/support/postgres-process.js';
import { startServerProcess } from '../../../test/support/server-process.js';
import { makeUsers, uniqueTag } from '../../../test/support/users.js';
import { waitUntil } from '../../../test/support/wait.js';

const CRASHES = 5;
// Answers that show the service is writing under load: before each crash, and after the last.
const LOAD_ANSWERS = 300;
const SINGLE_CLIENTS = 200;
const BATCH_CLIENTS = 4;

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
    service = await startServerProcess({
      DATABASE_URL: server.url,
      DB_CONNECT_TIMEOUT_MS: '1000',
      LOG_LEVEL: 'warn',
    });
  });
  after(async () => {
    await service?.stop();
    await server?.stop().catch(() => {});
    await rm(path.dirname(dataDir), { recursive: true, force: true });
  });

  test(`${CRASHES} immediate shutdowns of PostgreSQL under ${SINGLE_CLIENTS} single-user and ${BATCH_CLIENTS} batch clients`, async () => {
    /** @type {Set<string>} */ const acknowledged = new Set();
    // The users of the 503s that said nothing was written: none may be stored. (A write whose
    // commit was in flight at the crash is 503 outcome_unknown, and may be.)
    /** @type {Set<string>} */ const refused = new Set();
    const inDoubt = { answers: 0 };
    const statuses = new Map();
    /** @type {string[]} */ const problems = [];
    let stop = false;
    const count = (/** @type {number} */ status) => statuses.get(status) ?? 0;
    /** Waits until `more` answers of `status` have come since the call. @param {number} status @param {number} more @param {string} what */
    const waitForAnswers = async (status, more, what) => {
      const from = count(status);
      await waitUntil(() => count(status) >= from + more, what, 30_000, 20);
    };

    /** @param {number} size */
    async function client(size) {
      while (!stop) {
        const users = makeUsers(size, uniqueTag());
        try {
          const res = await fetch(`${service.baseUrl}/users`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(users),
          });
          const body = await res.text();
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          if (res.status === 201) for (const u of users) acknowledged.add(u.email);
          else if (res.status === 503) {
            if (!res.headers.get('retry-after')) problems.push('503 without Retry-After');
            const { error, message } = JSON.parse(body);
            if (/nothing was written/.test(message)) for (const u of users) refused.add(u.email);
            else if (error === 'outcome_unknown') inDoubt.answers++;
            else problems.push(`503 that says neither: ${body.slice(0, 200)}`);
            await sleep(50); // a client's pause before it tries again, not a wait for the test
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
        await waitForAnswers(
          201,
          LOAD_ANSWERS,
          `${LOAD_ANSWERS} writes ${crash === 0 ? 'under load' : `after restart ${crash}`}`,
        );
        const pid = await postmasterPid(server.dataDir);
        const seenDown = waitForAnswers(503, 1, `a 503 after crash ${crash + 1}`);
        process.kill(pid, 'SIGQUIT'); // what pg_ctl -m immediate sends: no clean goodbye to clients
        await Promise.all([
          waitUntil(() => !isAlive(pid), `PostgreSQL (pid ${pid}) to exit`, 10_000, 20),
          seenDown,
        ]);
        assert.equal(service.child.exitCode, null, `the service exited after crash ${crash + 1}`);
        await server.start();
      }
      await waitForAnswers(201, LOAD_ANSWERS, `${LOAD_ANSWERS} writes after the last restart`);
    } finally {
      stop = true;
      await Promise.all(clients);
    }

    console.error(
      `[crash] ${[...statuses].map(([status, n]) => `${status} × ${n}`).join(', ')}; 503 in doubt (outcome_unknown): ${inDoubt.answers}; users of 503s that said nothing was written: ${refused.size}`,
    );
    assert.equal(service.child.exitCode, null, 'the service process is still up');
    assert.deepEqual(problems.slice(0, 10), [], 'every answer was 201 or 503 with Retry-After');
    assert.ok((statuses.get(503) ?? 0) > 0, 'the outages were seen as 503');
    assert.ok((statuses.get(201) ?? 0) > 0);

    const db = new pg.Client(server.url);
    await db.connect();
    try {
      const { rows } = await db.query('SELECT email FROM users WHERE email = ANY($1)', [
        [...acknowledged],
      ]);
      assert.equal(rows.length, acknowledged.size, 'every acknowledged user is stored');
      const { rows: written } = await db.query('SELECT email FROM users WHERE email = ANY($1)', [
        [...refused],
      ]);
      assert.deepEqual(
        written,
        [],
        `no user of a 503 that said "nothing was written" is stored (${refused.size} such users; ${inDoubt.answers} answers in doubt)`,
      );
    } finally {
      await db.end();
    }
    const res = await fetch(`${service.baseUrl}/users`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(makeUsers(1)),
    });
    assert.equal(res.status, 201, 'it serves again');
  });
});
