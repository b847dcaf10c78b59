import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { migrate } from '@sluice/db/migrate';
import { startLocalPostgres, tempDataDir } from '@sluice/db/local-postgres';
import pg from 'pg';
import {
  isAlive,
  postgresProcesses,
  postmasterPid,
} from '../../../test/support/postgres-process.js';
import { startServerProcess } from '../../../test/support/server-process.js';
import { SAMPLE_HASH, makeUsers, uniqueTag } from '../../../test/support/users.js';
import { within } from '../../../test/support/time-factor.js';
import { waitUntil } from '../../../test/support/wait.js';

// A kill -9 mid-request leaves, for every Idempotency-Key, either its rows and their answer or
// neither: the service killed under keyed load (2,500-user batches in three chunks, 300-user ones
// with their representation, single users under group commit, NDJSON streams of 10,000 users in
// two chunks and CSV streams of 4,000 in merge mode), each kill once a stream is mid-COPY, then a
// new service on the same database; and PostgreSQL killed under the same load, then started
// again. For every request sent, answered or not: its users all stored and its key holding its
// answer (a retry replays it, byte for byte the answer the first got, if it got one), or no user
// and no key (a retry writes, 201). During the load no key is ever seen committed without its
// answer. The log names no email, key, hash or token.

const TOKEN = `crash-token-${uniqueTag()}-0123456789`;
const CLIENT = 'crasher';
/** @typedef {'json' | 'ndjson' | 'csv'} Format */
const LOADS =
  /** @type {{ name: string, size: number, clients: number, prefer: string | undefined, format: Format }[]} */ ([
    { name: 'single', size: 1, clients: 40, prefer: undefined, format: 'json' },
    { name: 'batch', size: 2500, clients: 2, prefer: undefined, format: 'json' },
    {
      name: 'representation',
      size: 300,
      clients: 2,
      prefer: 'return=representation',
      format: 'json',
    },
    { name: 'ndjson', size: 10_000, clients: 1, prefer: undefined, format: 'ndjson' },
    { name: 'csv', size: 4000, clients: 1, prefer: 'resolution=merge-duplicates', format: 'csv' },
  ]);
// Answers before each kill, so that it lands under load and not at its start.
const ANSWERS_BEFORE_KILL = 150;
// How often the key table is looked at during the load, from another session.
const SAMPLE_EVERY_MS = 5;
const SERVICE_KILLS = 3;
const POSTGRES_KILLS = 2;
// Every key starts so, every email ends so: no log line may hold either.
const KEY_PREFIX = 'idem-crash-';
const EMAIL_DOMAIN = '@example.com';

/** @typedef {{ key: string, users: ReturnType<typeof makeUsers>, prefer: string | undefined, format: Format, answer: { status: number, text: string, retryAfter: string | null } | null }} Sent */

/** @param {string} value */
const quoted = (value) => `"${value.replaceAll('"', '""')}"`;
/** Each format's content type and body of a request's users (the same bytes on every retry). @type {Record<Format, { type: string, body: (users: Sent['users']) => string }>} */
const BODIES = {
  json: { type: 'application/json', body: (users) => JSON.stringify(users) },
  ndjson: {
    type: 'application/x-ndjson',
    body: (users) => `${users.map((u) => JSON.stringify(u)).join('\n')}\n`,
  },
  csv: {
    type: 'text/csv',
    body: (users) =>
      `email,name,phone,passwordHash\r\n${users.map((u) => [u.email, quoted(u.name), u.phone, quoted(u.passwordHash)].join(',')).join('\r\n')}\r\n`,
  },
};

describe('kill -9 mid-request with Idempotency-Keys: the rows and their answer, or neither', () => {
  /** @type {Awaited<ReturnType<typeof startLocalPostgres>>} */ let server;
  /** @type {string} */ let dataDir;
  /** @type {pg.Client} */ let admin;
  /** Every service process started, for the log check. @type {Awaited<ReturnType<typeof startServerProcess>>[]} */
  const services = [];

  before(async () => {
    dataDir = await tempDataDir();
    server = await startLocalPostgres({ dataDir, persistent: true });
    await migrate(server.url);
    admin = new pg.Client(server.url);
    await admin.connect();
  });
  after(async () => {
    await admin?.end().catch(() => {});
    for (const s of services) await s.stop();
    await server?.stop().catch(() => {});
    if (dataDir) await rm(path.dirname(dataDir), { recursive: true, force: true });
  });

  const startService = async () => {
    const service = await startServerProcess({
      DATABASE_URL: server.url,
      DB_CONNECT_TIMEOUT_MS: '1000',
      INGEST_TOKENS: JSON.stringify({ [CLIENT]: TOKEN }),
      LOG_LEVEL: 'warn',
    });
    services.push(service);
    return service;
  };

  /** @param {string} baseUrl @param {Sent} sent */
  const post = async (baseUrl, { key, users, prefer, format }) => {
    const res = await fetch(`${baseUrl}/users`, {
      method: 'POST',
      headers: {
        'content-type': BODIES[format].type,
        authorization: `Bearer ${TOKEN}`,
        'idempotency-key': `"${key}"`,
        ...(prefer ? { prefer } : {}),
      },
      body: BODIES[format].body(users),
    });
    return {
      status: res.status,
      text: await res.text(),
      retryAfter: res.headers.get('retry-after'),
      replayed: res.headers.get('idempotent-replayed'),
    };
  };

  /**
   * Samples idempotency_keys from another session while the load runs: a committed key without
   * its answer must never be seen (the answer commits with the claim, in one transaction). Ends
   * quietly when PostgreSQL is killed under it.
   */
  function watchKeysWithoutAnswer() {
    const watcher = new pg.Client(server.url);
    watcher.on('error', () => {});
    let stopped = false;
    let seen = 0;
    let samples = 0;
    const sampling = (async () => {
      try {
        await watcher.connect();
        while (!stopped) {
          const {
            rows: [row],
          } = await watcher.query(
            'SELECT count(*)::int AS n FROM idempotency_keys WHERE fingerprint IS NULL',
          );
          seen = Math.max(seen, row.n);
          samples++;
          await new Promise((resolve) => setTimeout(resolve, SAMPLE_EVERY_MS));
        }
      } catch {
        // PostgreSQL killed: nothing more to see.
      } finally {
        await watcher.end().catch(() => {});
      }
    })();
    return {
      /** The most keys seen at once without their answer, and in how many looks. */
      seen: () => ({ keys: seen, samples }),
      stop: () => {
        stopped = true;
        return sampling;
      },
    };
  }

  /** What the watch of a load saw: no key without its answer, in at least one look. @param {ReturnType<typeof keyedLoad>} load */
  const checkWatched = (load) => {
    const { keys, samples } = load.watched();
    assert.ok(samples > 0, 'the key table was looked at during the load');
    assert.equal(keys, 0, 'no key was ever seen committed without its answer');
  };

  /**
   * Keyed load on `baseUrl` until stop(): every request a new key and new users, recorded with its
   * answer (null: none came, the connection was lost); the key table watched meanwhile.
   * @param {string} baseUrl
   */
  function keyedLoad(baseUrl) {
    const tag = uniqueTag();
    const watch = watchKeysWithoutAnswer();
    /** @type {Sent[]} */ const sent = [];
    let stopped = false;
    let answered = 0;
    let serial = 0;
    /** @param {typeof LOADS[number]} load */
    async function client({ name, size, prefer, format }) {
      while (!stopped) {
        const n = serial++;
        const key = `${KEY_PREFIX}${name}-${tag}-${n}`;
        /** @type {Sent} */ const request = {
          key,
          users: makeUsers(size, `${tag}-${n}`),
          prefer,
          format,
          answer: null,
        };
        sent.push(request);
        try {
          request.answer = await post(baseUrl, request);
          answered++;
          // A client's pause after a refusal, not a wait for the test.
          if (request.answer.status === 503)
            await new Promise((resolve) => setTimeout(resolve, 50));
        } catch {
          // The service died under it: no answer.
        }
      }
    }
    const clients = LOADS.flatMap((load) =>
      Array.from({ length: load.clients }, () => client(load)),
    );
    return {
      sent,
      answered: () => answered,
      watched: watch.seen,
      /** Sends no more; resolves once every request sent has its answer or has failed. */
      stop: () => {
        stopped = true;
        return Promise.all([...clients, watch.stop()]);
      },
    };
  }

  /**
   * Waits for `more` answers of the load, then for a stream's COPY to run while another transaction
   * of the service has written (a claim, rows): the kill then lands mid-stream and mid-write.
   * @param {ReturnType<typeof keyedLoad>} load @param {number} more
   */
  async function waitUntilMidWrite(load, more) {
    const from = load.answered();
    await waitUntil(
      () => load.answered() >= from + more,
      `${more} answers under load`,
      within(60_000),
      20,
    );
    await waitUntil(
      async () => {
        const {
          rows: [writes],
        } =
          await admin.query(`SELECT count(*) FILTER (WHERE query LIKE 'COPY%' AND state = 'active')::int AS copying, count(*)::int AS writing
        FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid() AND backend_type = 'client backend'`);
        return writes.copying > 0 && writes.writing > writes.copying;
      },
      'a stream and another write under way',
      within(10_000),
      2,
    );
  }

  /**
   * Every request sent: its users all stored and its key's answer, or neither; an answer it got
   * is the stored one. Then each is retried with its key: a replay of what is stored, or a write.
   * @param {string} baseUrl @param {Sent[]} sent @param {(answer: NonNullable<Sent['answer']>) => 'stored' | 'nothing' | 'either'} meaning  what an answer says was written
   */
  /** The log line of an answer's errorId, if a service logged one. @param {string} text */
  function loggedFor(text) {
    const errorId = /"errorId":"([^"]+)"/.exec(text)?.[1];
    const line = errorId && services.flatMap((x) => x.logs).find((l) => l.errorId === errorId);
    return line ? `; logged: ${JSON.stringify(line)}` : '';
  }

  async function checkEachKey(baseUrl, sent, meaning) {
    const counts = { stored: 0, neither: 0, answered: 0, streams: 0, streamsCaught: 0 };
    /** @type {string[]} */ const problems = [];
    const { rows: keyRows } = await admin.query(
      "SELECT key, fingerprint IS NOT NULL AS complete, outcome->'written' AS written FROM idempotency_keys WHERE client = $1 AND key = ANY($2)",
      [`token:${CLIENT}`, sent.map((s) => s.key)],
    );
    const keys = new Map(keyRows.map((r) => [r.key, r]));
    const { rows: userRows } = await admin.query('SELECT email FROM users WHERE email = ANY($1)', [
      sent.flatMap((s) => s.users.map((u) => u.email)),
    ]);
    const stored = new Set(userRows.map((r) => r.email));
    for (const s of sent) {
      const row = keys.get(s.key);
      const users = s.users.filter((u) => stored.has(u.email)).length;
      const what = s.answer ? `${s.answer.status} ${s.answer.text.slice(0, 120)}` : 'no answer';
      if (s.answer) counts.answered++;
      if (s.format !== 'json') {
        counts.streams++;
        if (s.answer?.status !== 201) counts.streamsCaught++;
      }
      if (row && row.complete && users === s.users.length) {
        counts.stored++;
        if (s.answer?.status === 201 && row.written.inserted !== s.users.length)
          problems.push(`${s.key}: answered ${what}, stored another outcome`);
        if (s.answer && meaning(s.answer) === 'nothing')
          problems.push(`${s.key}: answered ${what}, yet its rows and answer are stored`);
      } else if (!row && users === 0) {
        counts.neither++;
        if (s.answer && meaning(s.answer) === 'stored')
          problems.push(`${s.key}: answered ${what}, yet nothing of it is stored`);
      } else {
        problems.push(
          `${s.key} (${what}): ${users} of ${s.users.length} users stored, its key ${row ? (row.complete ? 'complete' : 'incomplete') : 'absent'}`,
        );
      }
    }
    assert.deepEqual(
      problems.slice(0, 10),
      [],
      `${problems.length} requests left something else than their rows and answer or neither`,
    );
    const {
      rows: [incomplete],
    } = await admin.query(
      'SELECT count(*)::int AS n FROM idempotency_keys WHERE fingerprint IS NULL',
    );
    assert.equal(incomplete.n, 0, 'no key claimed without its outcome');

    for (const s of sent) {
      const row = keys.get(s.key);
      const retry = await post(baseUrl, s);
      if (row) {
        assert.equal(retry.replayed, 'true', `${s.key}: a retry replays`);
        assert.equal(retry.status, row.written.inserted > 0 ? 201 : 200, s.key);
        if (s.answer?.status === 201)
          assert.equal(retry.text, s.answer.text, `${s.key}: the first answer, byte for byte`);
      } else {
        assert.equal(
          retry.status,
          201,
          `${s.key}: a retry writes: ${retry.text.slice(0, 200)}${loggedFor(retry.text)}`,
        );
        assert.equal(retry.replayed, null, s.key);
      }
    }
    const {
      rows: [after],
    } = await admin.query('SELECT count(*)::int AS n FROM users WHERE email = ANY($1)', [
      sent.flatMap((s) => s.users.map((u) => u.email)),
    ]);
    assert.equal(
      after.n,
      sent.reduce((n, s) => n + s.users.length, 0),
      'after the retries every user is stored once',
    );
    return counts;
  }

  /**
   * What an answer says was written, with the answers that break the contract collected (a 500
   * with the service's log line of its errorId): 201, stored; 503 with Retry-After, nothing (it
   * says so) or either (outcome_unknown).
   * @param {string[]} problems @param {Awaited<ReturnType<typeof startServerProcess>>} service
   * @returns {(answer: NonNullable<Sent['answer']>) => 'stored' | 'nothing' | 'either'}
   */
  const meaningOf = (problems, service) => (answer) => {
    if (answer.status === 201) return 'stored';
    const { error, message, errorId } = JSON.parse(answer.text);
    if (answer.status === 503 && answer.retryAfter) {
      if (error === 'outcome_unknown') return 'either';
      if (/nothing was written/.test(message)) return 'nothing';
    }
    const logged = errorId && service.logs.find((l) => l.errorId === errorId);
    problems.push(
      `${answer.status} ${answer.text.slice(0, 200)}${logged ? `; logged: ${JSON.stringify(logged.err).slice(0, 1500)}` : ''}`,
    );
    return 'either';
  };

  test(
    `the service killed -9 ${SERVICE_KILLS} times under keyed load, a new one started on the same database`,
    { timeout: 600_000 },
    async () => {
      let streamsCaught = 0;
      for (let kill = 0; kill < SERVICE_KILLS; kill++) {
        const service = await startService();
        const load = keyedLoad(service.baseUrl);
        await waitUntilMidWrite(load, ANSWERS_BEFORE_KILL);
        service.child.kill('SIGKILL');
        const [, exit] = await Promise.all([load.stop(), service.exited]);
        assert.equal(exit.signal, 'SIGKILL');
        // Its backends end once they read its socket's end: an open transaction rolled back, a COMMIT already sent done.
        await waitUntil(
          async () =>
            (
              await admin.query(
                "SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
              )
            ).rows[0].n === 0,
          "the killed service's connections to end",
          within(10_000),
          20,
        );

        const next = await startService();
        /** @type {string[]} */ const refusals = [];
        const counts = await checkEachKey(next.baseUrl, load.sent, meaningOf(refusals, service));
        assert.deepEqual(
          refusals,
          [],
          'every answer before the kill was 201, or 503 with Retry-After saying what was written',
        );
        console.error(
          `[service kill ${kill + 1}] ${load.sent.length} requests, ${counts.answered} answered before the kill; ${counts.stored} stored with their answer, ${counts.neither} neither; ${counts.streams} streams, ${counts.streamsCaught} caught by the kill; the key table looked at ${load.watched().samples} times`,
        );
        assert.ok(counts.answered < load.sent.length, 'the kill caught requests in flight');
        checkWatched(load);
        streamsCaught += counts.streamsCaught;
        await next.stop();
      }
      assert.ok(streamsCaught > 0, 'the kills caught streams mid-write');
    },
  );

  test(
    `PostgreSQL killed -9 (the postmaster and every backend) ${POSTGRES_KILLS} times under keyed load, then started again`,
    { timeout: 600_000 },
    async () => {
      const service = await startService();
      let streamsCaught = 0;
      for (let kill = 0; kill < POSTGRES_KILLS; kill++) {
        const load = keyedLoad(service.baseUrl);
        await waitUntilMidWrite(load, ANSWERS_BEFORE_KILL);
        await admin.end();
        const postmaster = await postmasterPid(server.dataDir);
        const pids = await postgresProcesses(postmaster);
        for (const pid of pids) process.kill(pid, 'SIGKILL');
        const stopping = load.stop();
        await waitUntil(
          () => pids.every((pid) => !isAlive(pid)),
          'every PostgreSQL process to exit',
          within(10_000),
          20,
        );
        await stopping;
        await server.start();
        admin = new pg.Client(server.url);
        await admin.connect();
        await waitUntil(
          async () => (await fetch(`${service.baseUrl}/readyz`)).status === 200,
          'the service to be ready again',
          within(30_000),
          100,
        );

        /** @type {string[]} */ const refusals = [];
        const counts = await checkEachKey(service.baseUrl, load.sent, meaningOf(refusals, service));
        assert.deepEqual(
          refusals.slice(0, 5),
          [],
          'every answer was 201, or 503 with Retry-After saying what was written',
        );
        console.error(
          `[postgres kill ${kill + 1}] ${load.sent.length} requests, ${counts.answered} answered; ${counts.stored} stored with their answer, ${counts.neither} neither; ${counts.streams} streams, ${counts.streamsCaught} caught by the kill; the key table looked at ${load.watched().samples} times`,
        );
        streamsCaught += counts.streamsCaught;
        assert.ok(counts.neither > 0, 'the kill caught requests in flight');
        checkWatched(load);
        assert.equal(service.child.exitCode, null, 'the service outlived PostgreSQL');
      }
      assert.ok(streamsCaught > 0, 'the kills caught streams mid-write');
    },
  );

  test('no log line of any service process names an email, a key, a hash or the token', () => {
    const lines = services.flatMap((s) => s.logs.map((l) => JSON.stringify(l)));
    assert.ok(
      lines.some((line) => line.includes('"statusCode":503')),
      'the refusals during the outage were logged',
    );
    const leaks = lines.filter((line) =>
      [KEY_PREFIX, EMAIL_DOMAIN, TOKEN, SAMPLE_HASH].some((secret) => line.includes(secret)),
    );
    assert.deepEqual(leaks.slice(0, 5), []);
  });
});
