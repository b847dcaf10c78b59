// A pooler that cannot hold a transaction (PgBouncer, pool_mode = statement), and a database the
// service cannot use at all: start-up refused in one line naming the fix; a service already up
// answers a write that needs a transaction with a non-retryable statement_pooling, and /readyz 503.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import readline from 'node:readline';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { startForwarder, throughForwarder } from '../../../test/support/forwarder.js';
import { startPgBouncer } from '../../../test/support/pgbouncer.js';
import { freePort } from '@sluice/db/local-postgres';
import { makeUsers } from '../../../test/support/users.js';
import { waitUntil } from '../../../test/support/wait.js';

const SERVER = fileURLToPath(new URL('../../src/server.js', import.meta.url));

/** The service started on `url`: its exit code and what it printed to stderr. @param {string} url */
function startOn(url) {
  const r = spawnSync(process.execPath, [SERVER], {
    env: {
      ...process.env,
      DATABASE_URL: url,
      HOST: '127.0.0.1',
      PORT: '0',
      DB_CONNECT_TIMEOUT_MS: '3000',
    },
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { status: r.status, lines: r.stderr.split('\n').filter((l) => l.startsWith('sluice: ')) };
}

/**
 * The service started on `url` until it said a `sluice:` line on stderr, then asked /readyz until
 * it answers: its status, and whether the process still runs once it has.
 * @param {string} url @returns {Promise<{ line: string, readyz: number | undefined, running: boolean }>}
 */
async function firstLineOn(url) {
  const port = await freePort();
  const child = spawn(process.execPath, [SERVER], {
    env: {
      ...process.env,
      DATABASE_URL: url,
      HOST: '127.0.0.1',
      PORT: String(port),
      DB_CONNECT_TIMEOUT_MS: '3000',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  try {
    const lines = readline.createInterface({
      input: /** @type {import('node:stream').Readable} */ (child.stderr),
    });
    for await (const line of lines) {
      if (!line.startsWith('sluice: ')) continue;
      /** @type {number | undefined} */ let readyz;
      await waitUntil(
        async () => {
          if (child.exitCode !== null) return true;
          readyz = await fetch(`http://127.0.0.1:${port}/readyz`, {
            signal: AbortSignal.timeout(8_000),
          }).then(
            (res) => res.status,
            () => undefined,
          );
          return readyz !== undefined;
        },
        `/readyz on port ${port} to answer`,
        15_000,
        100,
      );
      return { line, readyz, running: child.exitCode === null };
    }
    return { line: '', readyz: undefined, running: false };
  } finally {
    child.kill('SIGKILL');
  }
}

describe('a database the service cannot use, told at start-up with its fix', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startPgBouncer>>} */ let pooler;
  before(async () => {
    db = await createTestDatabase();
    pooler = await startPgBouncer({ upstreamUrl: db.url, poolMode: 'statement' });
  });
  after(async () => {
    await pooler?.stop();
    await db?.drop();
  });

  test('behind PgBouncer in statement mode: start-up refused in one line naming pool_mode = transaction', () => {
    const { status, lines } = startOn(pooler.url);
    assert.equal(status, 1);
    assert.equal(lines.length, 1, lines.join('\n'));
    assert.match(lines[0], /pool_mode = statement.*set pool_mode = transaction/);
  });

  test('wrong password, unknown database: start-up refused; nothing listening, unknown host: said, then served; one line each, its cause and its fix', async () => {
    const url = new URL(db.url);
    const wrongPassword = new URL(url);
    wrongPassword.password = 'not-the-password';
    const unknownDatabase = new URL(url);
    unknownDatabase.pathname = '/no_such_database_here';
    const refused = new URL(url);
    refused.port = String(await freePort());
    const unknownHost = new URL(url);
    unknownHost.hostname = 'no-such-host.invalid';
    const cases = [
      [
        wrongPassword,
        /refused the password of user .* \(28P01\): put that user's password in DATABASE_URL/,
      ],
      [
        unknownDatabase,
        /database "no_such_database_here" does not exist .* \(3D000\): create it \(createdb no_such_database_here\)/,
      ],
    ];
    for (const [target, expected] of [
      [
        refused,
        /nothing accepts connections at .* \(ECONNREFUSED\): start PostgreSQL there, or point DATABASE_URL .*503 until it answers/,
      ],
      [
        unknownHost,
        /host "no-such-host.invalid" is not known \((ENOTFOUND|EAI_AGAIN)\): fix the host in DATABASE_URL/,
      ],
    ]) {
      const { line, readyz, running } = await firstLineOn(String(target));
      assert.match(line, /** @type {RegExp} */ (expected));
      assert.equal(readyz, 503, 'serving, 503 until the database answers');
      assert.equal(running, true, 'still serving once it answered');
    }
    for (const [target, expected] of cases) {
      const { status, lines } = startOn(String(target));
      assert.equal(status, 1, String(target));
      assert.equal(lines.length, 1, lines.join('\n'));
      assert.match(lines[0], /** @type {RegExp} */ (expected));
      assert.ok(!lines[0].includes('not-the-password'), 'no password shown');
    }
  });

  test('a service already up behind it: a write that needs a transaction is statement_pooling (never a retryable 503), /readyz 503 naming it', async () => {
    const app = await startTestApp({
      databaseUrl: pooler.url,
      env: { INSERT_CHUNK_ROWS: '100', GROUP_COMMIT: 'off' },
    });
    try {
      assert.equal(
        (await app.postUsers(makeUsers(1))).status,
        201,
        'a single statement needs no transaction',
      );
      for (const res of [
        await app.postUsers(makeUsers(250)),
        await app.postUsers(
          makeUsers(3)
            .map((u) => JSON.stringify(u))
            .join('\n') + '\n',
          { contentType: 'application/x-ndjson' },
        ),
      ]) {
        assert.equal(res.status, 500, res.text);
        assert.equal(res.body.code, '08P01');
        assert.equal(res.headers.get('retry-after'), null, 'not to be retried');
        assert.match(res.body.message, /pool_mode = statement/);
      }
      const ready = await fetch(`${app.baseUrl}/readyz`);
      assert.equal(ready.status, 503);
      assert.match((await ready.json()).reason, /set pool_mode = transaction/);
    } finally {
      await app.close();
    }
  });

  test('/readyz asks the pooler itself: 503 naming pool_mode before any write, 200 once it holds transactions (no write sent), 503 when it no longer does', async () => {
    const transactional = await startPgBouncer({ upstreamUrl: db.url, poolMode: 'transaction' });
    const forwarder = await startForwarder(pooler.port);
    const app = await startTestApp({
      databaseUrl: throughForwarder(pooler.url, forwarder),
      env: { INSERT_CHUNK_ROWS: '100', GROUP_COMMIT: 'off' },
    });
    /** @param {number} status @param {RegExp} [reason] */
    const readyzIs = async (status, reason) => {
      const res = await fetch(`${app.baseUrl}/readyz`, { signal: AbortSignal.timeout(5_000) });
      const body = await res.json();
      return res.status === status && (reason === undefined || reason.test(body.reason ?? ''));
    };
    const before = await db.countUsers();
    try {
      assert.ok(await readyzIs(503, /set pool_mode = transaction/), 'said before any write');
      const refused = await app.postUsers(makeUsers(250));
      assert.equal(refused.status, 500, refused.text);
      assert.equal(refused.body.error, 'statement_pooling');

      forwarder.to(transactional.port);
      await waitUntil(() => readyzIs(200), '/readyz 200 with no write sent', 10_000, 100);
      const written = await app.postUsers(makeUsers(250));
      assert.equal(written.status, 201, written.text);

      forwarder.to(pooler.port);
      await waitUntil(
        () => readyzIs(503, /set pool_mode = transaction/),
        '/readyz 503 naming pool_mode again',
        10_000,
        100,
      );
      assert.equal(await db.countUsers(), before + 250, 'the refused batch wrote nothing');
    } finally {
      await app.close();
      await forwarder.close();
      await transactional.stop();
    }
  });
});
