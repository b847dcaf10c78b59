// POST /users with a streamed body (NDJSON, JSON Lines, CSV), against the real PostgreSQL: written
// through COPY in one transaction, so the whole body is stored or none of it.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, describe, test } from 'node:test';
import zlib from 'node:zlib';
/* eslint n/no-unsupported-features/node-builtins: ["error", { allowExperimental: true,
   version: "^22.15.0 || >=23.8.0" }] -- zstd: the tests run on the Node of .nvmrc, which has it */
import { startTestApp } from '../../../test/support/app.js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { within } from '../../../test/support/time-factor.js';
import { waitUntil } from '../../../test/support/wait.js';
import { makeUsers, SAMPLE_HASH } from '../../../test/support/users.js';

const NDJSON = 'application/x-ndjson';
const CSV = 'text/csv';

/** @param {object[]} users */
const ndjson = (users) => users.map((u) => JSON.stringify(u)).join('\n') + '\n';
/** @param {string} v */
const quoted = (v) => `"${v.replaceAll('"', '""')}"`;
/** @param {{ email: string, name: string, phone?: string, passwordHash?: string }[]} users */
const csv = (users) =>
  'email,name,phone,passwordHash\r\n' +
  users
    .map((u) =>
      [u.email, quoted(u.name), u.phone ?? '', u.passwordHash ? quoted(u.passwordHash) : ''].join(
        ',',
      ),
    )
    .join('\r\n') +
  '\r\n';

/**
 * Sends the start of a body, then closes the connection without finishing it.
 * @param {string} baseUrl @param {string} contentType @param {string} start
 */
function sendAndLeave(baseUrl, contentType, start) {
  return new Promise((resolve) => {
    const req = http.request(`${baseUrl}/users`, {
      method: 'POST',
      headers: { 'content-type': contentType, 'transfer-encoding': 'chunked' },
    });
    req.on('error', () => resolve(undefined));
    req.on('response', () => resolve(undefined));
    req.write(start, () =>
      setTimeout(() => {
        req.destroy();
        resolve(undefined);
      }, 300),
    );
  });
}

describe('POST /users with a streamed body', () => {
  const ctx = useAppAndDatabase({
    STREAM_IDLE_TIMEOUT_MS: '1000',
    MAX_STREAM_BYTES: String(64 * 1024 * 1024),
  });

  test('NDJSON: every line one user, stored as sent; blank lines and CRLF are fine', async () => {
    const users = makeUsers(5);
    const body = `${JSON.stringify(users[0])}\r\n\n${ndjson(users.slice(1))}\n`;
    const res = await ctx.app.postUsers(body, { contentType: NDJSON });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(res.body, { received: 5, inserted: 5, updated: 0, duplicates: 0 });
    const stored = await ctx.db.usersByEmail(users.map((u) => u.email));
    assert.deepEqual(stored.get(users[4].email), {
      email: users[4].email,
      name: users[4].name,
      phone: users[4].phone,
      password_hash: SAMPLE_HASH,
    });
    const again = await ctx.app.postUsers(body, {
      contentType: 'application/jsonl; charset=utf-8',
    });
    assert.deepEqual(
      [again.status, again.body],
      [200, { received: 5, inserted: 0, updated: 0, duplicates: 5 }],
    );
  });

  test('CSV: a header row, quoted fields with commas and quotes, empty fields not sent', async () => {
    const [a, b] = makeUsers(2);
    const body = `name,email,phone\n${quoted('Lovelace, "Ada"')},${a.email},${a.phone}\n"B",${b.email},\n`;
    const res = await ctx.app.postUsers(body, { contentType: CSV });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(res.body, { received: 2, inserted: 2, updated: 0, duplicates: 0 });
    const stored = await ctx.db.usersByEmail([a.email, b.email]);
    assert.deepEqual(stored.get(a.email), {
      email: a.email,
      name: 'Lovelace, "Ada"',
      phone: a.phone,
      password_hash: null,
    });
    assert.deepEqual(stored.get(b.email), {
      email: b.email,
      name: 'B',
      phone: null,
      password_hash: null,
    });
  });

  test('gzip, deflate, br and zstd bodies, as for JSON', async () => {
    const users = makeUsers(300);
    const gz = await ctx.app.postUsers(zlib.gzipSync(ndjson(users.slice(0, 150))), {
      contentType: NDJSON,
      headers: { 'content-encoding': 'gzip' },
    });
    assert.deepEqual([gz.status, gz.body?.inserted], [201, 150], gz.text);
    const df = await ctx.app.postUsers(zlib.deflateSync(csv(users.slice(150))), {
      contentType: CSV,
      headers: { 'content-encoding': 'deflate' },
    });
    assert.deepEqual([df.status, df.body?.inserted], [201, 150], df.text);
    const more = makeUsers(300);
    const br = await ctx.app.postUsers(zlib.brotliCompressSync(csv(more.slice(0, 150))), {
      contentType: CSV,
      headers: { 'content-encoding': 'br' },
    });
    assert.deepEqual([br.status, br.body?.inserted], [201, 150], br.text);
    const zstd = await ctx.app.postUsers(zlib.zstdCompressSync(ndjson(more.slice(150))), {
      contentType: NDJSON,
      headers: { 'content-encoding': 'zstd' },
    });
    assert.deepEqual([zstd.status, zstd.body?.inserted], [201, 150], zstd.text);
    const stored = await ctx.db.usersByEmail([...users, ...more].map((u) => u.email));
    assert.equal(stored.size, 600);
    const bad = await ctx.app.postUsers(Buffer.from('not gzip at all'), {
      contentType: NDJSON,
      headers: { 'content-encoding': 'gzip' },
    });
    assert.deepEqual([bad.status, bad.body?.error], [400, 'malformed_encoding']);
  });

  test('an invalid last line: 400 naming its line and field, nothing stored', async () => {
    const users = makeUsers(2000);
    const before = await ctx.db.countUsers();
    const body = ndjson(users) + JSON.stringify({ email: 'not-an-email', name: 'Last' }) + '\n';
    const res = await ctx.app.postUsers(body, { contentType: NDJSON });
    assert.equal(res.status, 400);
    assert.equal(res.body.error, 'invalid_batch');
    assert.deepEqual(res.body.errors, [
      {
        index: 2000,
        line: 2001,
        field: 'email',
        message: 'must be a plausible email address (local@domain.tld)',
      },
    ]);
    assert.match(res.body.message, /^1 of 2001 users are invalid/);
    assert.equal(await ctx.db.countUsers(), before);
  });

  test('CSV: lines are counted as editors count them, across quoted line breaks', async () => {
    const [a, b, c] = makeUsers(3);
    const body = `email,name\n${a.email},"two\nlines"\n${b.email},ok\n${c.email},\n`;
    const res = await ctx.app.postUsers(body, { contentType: CSV });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body.errors, [
      {
        index: 0,
        line: 2,
        field: 'name',
        message: 'must not contain control characters (NUL included)',
      },
      { index: 2, line: 5, field: 'name', message: 'is required' },
    ]);
  });

  test('at most 100 problems are named, and the body is refused without reading on for ever', async () => {
    const bad = Array.from({ length: 150 }, (_, i) => ({ email: `bad-${i}`, name: 'x' }));
    const res = await ctx.app.postUsers(ndjson(bad), { contentType: NDJSON });
    assert.equal(res.status, 400);
    assert.equal(res.body.errors.length, 100);
    assert.equal(res.body.errors[99].line, 100);
  });

  test('an invalid first line of a body of many pieces: 400 naming it, after reading the rest', async () => {
    const users = makeUsers(30_000);
    const before = await ctx.db.countUsers();
    const res = await ctx.app.postUsers(`{"email":"first","name":"F"}\n${ndjson(users)}`, {
      contentType: NDJSON,
    });
    assert.equal(res.status, 400, res.text);
    assert.deepEqual(res.body.errors, [
      {
        index: 0,
        line: 1,
        field: 'email',
        message: 'must be a plausible email address (local@domain.tld)',
      },
    ]);
    assert.match(res.body.message, /^1 of 30001 users are invalid/);
    assert.equal(await ctx.db.countUsers(), before);
  });

  test("a field given twice in a line is that user's problem", async () => {
    const [a] = makeUsers(1);
    const res = await ctx.app.postUsers(`{"email":"${a.email}","name":"A","name":"B"}\n`, {
      contentType: NDJSON,
    });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body.errors, [
      {
        index: 0,
        line: 1,
        field: 'name',
        message: 'is given more than once in this object; send each field once',
      },
    ]);
  });

  test('a malformed line or record: 400 naming it, nothing stored', async () => {
    const users = makeUsers(3);
    const before = await ctx.db.countUsers();
    const json = await ctx.app.postUsers(`${ndjson(users.slice(0, 2))}{"email": oops}\n`, {
      contentType: NDJSON,
    });
    assert.deepEqual([json.status, json.body.error], [400, 'malformed_json']);
    assert.match(json.body.message, /^line 3 is not valid JSON/);
    const fields = await ctx.app.postUsers(
      `email,name\n${users[0].email},A\n${users[1].email},B,extra\n`,
      { contentType: CSV },
    );
    assert.deepEqual([fields.status, fields.body.error], [400, 'malformed_csv']);
    assert.match(fields.body.message, /^line 3: the record has 3 fields where the header names 2/);
    const header = await ctx.app.postUsers(`email,name,password\n`, { contentType: CSV });
    assert.deepEqual([header.status, header.body.error], [400, 'malformed_csv']);
    assert.match(header.body.message, /^line 1: the header names a column "password"/);
    const open = await ctx.app.postUsers(`email,name\n${users[2].email},"never closed\n`, {
      contentType: CSV,
    });
    assert.deepEqual([open.status, open.body.error], [400, 'malformed_csv']);
    const utf8 = await ctx.app.postUsers(
      Buffer.from([
        ...Buffer.from(`{"email":"${users[2].email}","name":"`),
        0xff,
        ...Buffer.from('"}\n'),
      ]),
      { contentType: NDJSON },
    );
    assert.deepEqual([utf8.status, utf8.body.error], [400, 'invalid_utf8']);
    assert.equal(await ctx.db.countUsers(), before);
  });

  test('an empty body is an empty batch', async () => {
    const res = await ctx.app.postUsers('', { contentType: NDJSON });
    assert.deepEqual([res.status, res.body.error], [400, 'empty_batch']);
    const header = await ctx.app.postUsers('email,name\n', { contentType: CSV });
    assert.deepEqual([header.status, header.body.error], [400, 'empty_batch']);
  });

  test('an email twice in one body: ignore keeps the first, merge the last', async () => {
    const [u] = makeUsers(1);
    const first = { email: u.email, name: 'First', phone: '+15550000001' };
    const second = { email: u.email.toUpperCase(), name: 'Second' };
    const ignored = await ctx.app.postUsers(ndjson([first, second]), { contentType: NDJSON });
    assert.deepEqual(ignored.body, { received: 2, inserted: 1, updated: 0, duplicates: 1 });
    assert.equal((await ctx.db.usersByEmail([u.email])).get(u.email)?.name, 'First');
    const merged = await ctx.app.postUsers(ndjson([{ ...first, name: 'Middle' }, second]), {
      contentType: NDJSON,
      headers: { prefer: 'resolution=merge-duplicates' },
    });
    assert.deepEqual(merged.body, {
      received: 2,
      inserted: 0,
      updated: 1,
      stale: 1,
      duplicates: 2,
    });
    assert.equal(merged.headers.get('preference-applied'), 'resolution=merge-duplicates');
    assert.deepEqual((await ctx.db.usersByEmail([u.email])).get(u.email), {
      email: u.email,
      name: 'Second',
      phone: '+15550000001',
      password_hash: null,
    });
  });

  test("PostgREST's return=minimal and count=exact are honoured; a representation or ?columns refused before reading", async () => {
    const users = makeUsers(3);
    const minimal = await ctx.app.postUsers(ndjson(users), {
      contentType: NDJSON,
      headers: { prefer: 'return=minimal, count=exact' },
    });
    assert.deepEqual(
      [minimal.status, minimal.text, minimal.headers.get('content-range')],
      [201, '', '*/3'],
    );
    const rows = await ctx.app.postUsers(ndjson(users), {
      contentType: NDJSON,
      headers: { prefer: 'return=representation' },
    });
    assert.deepEqual([rows.status, rows.body.error], [400, 'unsupported_preference']);
    const res = await fetch(`${ctx.app.baseUrl}/users?columns=email,name`, {
      method: 'POST',
      headers: { 'content-type': CSV },
      body: csv(users),
    });
    assert.deepEqual([res.status, (await res.json()).error], [400, 'unsupported_query']);
  });

  test('a client that leaves mid-stream leaves nothing written, and the connection goes back to the pool', async () => {
    const users = makeUsers(20_000);
    const before = await ctx.db.countUsers();
    await sendAndLeave(ctx.app.baseUrl, NDJSON, ndjson(users).slice(0, 1_000_000));
    // The service's connection has ended its COPY and rolled back: nothing but this query is busy.
    await waitUntil(
      async () =>
        (
          await ctx.db.pool
            .query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database()
      AND pid <> pg_backend_pid() AND (state = 'active' OR state LIKE 'idle in transaction%')`)
        ).rows[0].n === 0,
      'no transaction left open',
      within(10_000),
      50,
    );
    assert.equal(await ctx.db.countUsers(), before);
    const res = await ctx.app.postUsers(ndjson(users.slice(0, 10)), { contentType: NDJSON });
    assert.equal(res.status, 201);
  });

  test('a stream that stops sending: 408 after STREAM_IDLE_TIMEOUT_MS, nothing written', async () => {
    const before = await ctx.db.countUsers();
    const res = await new Promise((resolve, reject) => {
      const req = http.request(`${ctx.app.baseUrl}/users`, {
        method: 'POST',
        headers: { 'content-type': NDJSON, 'transfer-encoding': 'chunked' },
      });
      req.on('error', reject);
      req.on('response', (r) => {
        let text = '';
        r.on('data', (c) => (text += c));
        r.on('end', () => resolve({ status: r.statusCode, body: JSON.parse(text) }));
      });
      req.write(ndjson(makeUsers(10)));
    });
    assert.deepEqual([res.status, res.body.error], [408, 'body_timeout']);
    assert.equal(await ctx.db.countUsers(), before);
  });

  const BROTLI_FAST = { params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 1 } };
  test('a body over MAX_STREAM_BYTES decoded, gzip, br or zstd: 413', async () => {
    const big = Buffer.alloc(64 * 1024 * 1024 + 1, 0x0a);
    for (const [coding, compress] of /** @type {const} */ ([
      ['gzip', zlib.gzipSync],
      ['br', (/** @type {Buffer} */ b) => zlib.brotliCompressSync(b, BROTLI_FAST)],
      ['zstd', zlib.zstdCompressSync],
    ])) {
      const res = await ctx.app.postUsers(compress(big), {
        contentType: NDJSON,
        headers: { 'content-encoding': coding },
      });
      assert.deepEqual([res.status, res.body?.error], [413, 'payload_too_large'], coding);
      assert.match(res.body.message, /MAX_STREAM_BYTES/);
    }
  });

  test('50,000 users in one body, NDJSON and CSV', async () => {
    const users = makeUsers(100_000);
    const before = await ctx.db.countUsers();
    const a = await ctx.app.postUsers(ndjson(users.slice(0, 50_000)), { contentType: NDJSON });
    assert.deepEqual(a.body, { received: 50_000, inserted: 50_000, updated: 0, duplicates: 0 });
    const b = await ctx.app.postUsers(csv(users.slice(50_000)), { contentType: CSV });
    assert.deepEqual(b.body, { received: 50_000, inserted: 50_000, updated: 0, duplicates: 0 });
    assert.equal(await ctx.db.countUsers(), before + 100_000);
  });

  test('a long body that meets stored and repeated emails past its first chunks: each email once, its first line kept', async () => {
    // Ignore mode copies chunks of 7,500 rows straight into users and writes a chunk again through
    // the staging table when it meets an email stored or sent before: these land in the fifth
    // chunk (stored before the request) and the seventh (sent in the first chunk).
    const users = makeUsers(65_000);
    const stored = users[30_000];
    const first = users[10];
    await ctx.app.postUsers([{ ...stored, name: 'Stored before' }]);
    const before = await ctx.db.countUsers();
    const body = users.map((u, i) => (i === 50_000 ? { ...first, name: 'Sent again' } : u));
    const res = await ctx.app.postUsers(ndjson(body), { contentType: NDJSON });
    assert.deepEqual(
      [res.status, res.body],
      [201, { received: 65_000, inserted: 64_998, updated: 0, duplicates: 2 }],
    );
    assert.equal(await ctx.db.countUsers(), before + 64_998);
    const rows = await ctx.db.usersByEmail([stored.email, first.email, users[64_999].email]);
    assert.equal(rows.get(stored.email)?.name, 'Stored before');
    assert.equal(rows.get(first.email)?.name, first.name);
    assert.equal(rows.get(users[64_999].email)?.name, users[64_999].name);
    assert.equal(
      rows.has(users[50_000].email),
      false,
      'the line that repeated an email was not stored',
    );
  });

  test('two bodies streamed at once with the same emails in opposite orders: each email once, a deadlock answered 503 and stored on retry', async () => {
    // Ignore mode copies rows in the order sent, so two such bodies lock each other's rows: PostgreSQL
    // ends one of them after deadlock_timeout (1 s), which must be a 503 that leaves nothing behind.
    const users = makeUsers(25_000);
    const before = await ctx.db.countUsers();
    const logged = ctx.app.logs.length;
    /** @param {object[]} body */
    const sendUntilStored = async (body) => {
      const statuses = [];
      for (let attempt = 0; attempt < 4; attempt++) {
        const started = performance.now();
        const res = await ctx.app.postUsers(ndjson(body), { contentType: NDJSON });
        statuses.push({
          status: res.status,
          ms: performance.now() - started,
          body: res.body,
          retryAfter: res.headers.get('retry-after'),
        });
        if (res.status !== 503) break;
      }
      return statuses;
    };
    const [forward, backward] = await Promise.all([
      sendUntilStored(users),
      sendUntilStored([...users].reverse()),
    ]);
    const answers = [...forward, ...backward];
    for (const a of answers) {
      assert.ok([200, 201, 503].includes(a.status), JSON.stringify(a));
      assert.ok(a.ms < 10_000, `answered in ${Math.round(a.ms)} ms`);
      if (a.status === 503)
        assert.deepEqual([a.body.error, a.retryAfter !== null], ['database_unavailable', true]);
    }
    const last = [forward.at(-1), backward.at(-1)];
    assert.deepEqual(
      last.map((a) => a?.status).sort(),
      [200, 201],
      JSON.stringify(answers.map((a) => a.status)),
    );
    assert.equal(
      last.reduce((n, a) => n + a?.body.inserted, 0),
      25_000,
    );
    assert.equal(await ctx.db.countUsers(), before + 25_000);
    const log = JSON.stringify(ctx.app.logs.slice(logged));
    assert.ok(!log.includes('@example.com'), 'no email in the log');
    assert.ok(!log.includes(SAMPLE_HASH.slice(0, 20)), 'no password hash in the log');
    assert.deepEqual(
      ctx.app.logs.slice(logged).filter((l) => l.level >= 50),
      [],
      'nothing logged as an error',
    );
  });

  test('npm run import streams a file (CSV, gzip-compressed NDJSON) and prints the counts', async () => {
    const script = fileURLToPath(new URL('../../../scripts/import.js', import.meta.url));
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-import-'));
    try {
      const users = makeUsers(3000);
      await writeFile(path.join(dir, 'users.csv'), csv(users.slice(0, 1500)));
      await writeFile(path.join(dir, 'users.ndjson.gz'), zlib.gzipSync(ndjson(users.slice(1500))));
      const run = (/** @type {string[]} */ args) =>
        promisify(execFile)(process.execPath, [script, ...args, '--url', ctx.app.baseUrl]);
      const fromCsv = await run([path.join(dir, 'users.csv')]);
      assert.deepEqual(
        { ...JSON.parse(fromCsv.stdout), seconds: 0 },
        { received: 1500, inserted: 1500, updated: 0, duplicates: 0, seconds: 0 },
      );
      assert.match(fromCsv.stderr, /rows\/s/);
      const fromGzip = await run([path.join(dir, 'users.ndjson.gz'), '--resolution', 'merge']);
      assert.equal(JSON.parse(fromGzip.stdout).inserted, 1500);
      await writeFile(path.join(dir, 'bad.jsonl'), '{"email":"nope","name":"N"}\n');
      const refused = await run([path.join(dir, 'bad.jsonl')]).catch(
        (/** @type {any} */ err) => err,
      );
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /import refused \(400\): .*invalid_batch/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('npm run import refused at once, or unable to read its file', () => {
  const ctx = useAppAndDatabase({ INGEST_TOKEN: 'the-right-token' });
  const script = fileURLToPath(new URL('../../../scripts/import.js', import.meta.url));
  /** @param {string[]} args */
  const run = (args) =>
    promisify(execFile)(process.execPath, [script, ...args], {
      env: { ...process.env, INGEST_TOKEN: '' },
    }).then(
      () => ({ code: 0, stdout: '', stderr: '' }),
      (/** @type {any} */ err) => err,
    );

  test("a wrong or missing token: the 401 is printed and the upload stops at once (exit 1), whatever the file's size", async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-import-'));
    try {
      // 40 MB: the service would read and drop it for BODY_READ_TIMEOUT_MS (30 s) if the CLI kept sending.
      const file = path.join(dir, 'big.ndjson');
      const lines = ndjson(makeUsers(20_000));
      await writeFile(file, lines.repeat(Math.ceil(40e6 / lines.length)));
      for (const token of [['--token', 'a-wrong-token'], []]) {
        const started = performance.now();
        const refused = await run([file, '--url', ctx.app.baseUrl, ...token]);
        const ms = performance.now() - started;
        assert.equal(refused.code, 1, refused.stderr);
        assert.match(refused.stderr, /import refused \(401\): .*"unauthorized"/);
        assert.ok(ms < 5000, `answered in ${Math.round(ms)} ms`);
        assert.ok(!refused.stderr.includes('a-wrong-token'), 'the token is not printed');
      }
      assert.equal(await ctx.db.countUsers(), 0);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  test('a file that cannot be read: one line naming it and why, exit 1, nothing sent', async () => {
    const missing = path.join(os.tmpdir(), 'sluice-no-such-file.ndjson');
    const lost = await run([missing, '--url', ctx.app.baseUrl]);
    assert.equal(lost.code, 1);
    assert.equal(lost.stderr, `import: cannot read ${missing}: no such file\n`);
    const dir = await run([os.tmpdir(), '--format', 'ndjson', '--url', ctx.app.baseUrl]);
    assert.equal(dir.code, 1);
    assert.equal(dir.stderr, `import: cannot read ${os.tmpdir()}: not a regular file\n`);
  });

  test('no service there: one line saying so (exit 1)', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'sluice-import-'));
    try {
      const file = path.join(dir, 'users.ndjson');
      await writeFile(file, ndjson(makeUsers(10)));
      // Port 1 on loopback: nothing listens.
      const refused = await run([file, '--url', 'http://127.0.0.1:1']);
      assert.equal(refused.code, 1);
      const lines = refused.stderr.trim().split('\n');
      assert.match(
        lines.at(-1) ?? '',
        /^import failed after \d+ bytes: connect ECONNREFUSED 127\.0\.0\.1:1 \(is the service running/,
      );
      assert.doesNotMatch(refused.stderr, /\n\s+at /, 'no stack trace');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('POST /users with a streamed body refused early', () => {
  const ctx = useAppAndDatabase({});

  test('a malformed first line of a large body is answered at once, and the connection serves the next request', async () => {
    const users = makeUsers(40_000);
    const body = `{"email": oops}\n${ndjson(users)}`;
    const started = performance.now();
    const res = await ctx.app.postUsers(body, { contentType: NDJSON });
    assert.deepEqual([res.status, res.body.error], [400, 'malformed_json']);
    assert.ok(performance.now() - started < 5000);
    const next = await ctx.app.postUsers(ndjson(users.slice(0, 3)), { contentType: NDJSON });
    assert.equal(next.status, 201);
    assert.equal(await ctx.db.countUsers(), 3);
  });
});

describe('POST /users with a streamed body and no database', () => {
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */
  let app;
  before(async () => {
    // Port 1 on loopback: nothing listens, the connection is refused at once.
    app = await startTestApp({
      databaseUrl: 'postgres://sluice@127.0.0.1:1/none',
      env: { DB_CONNECT_TIMEOUT_MS: '500' },
    });
  });
  after(() => app?.close());

  test('503 database_unavailable with Retry-After, before the body is read', async () => {
    const res = await app.postUsers(ndjson(makeUsers(100)), { contentType: NDJSON });
    assert.deepEqual(
      [res.status, res.body.error, res.headers.get('retry-after')],
      [503, 'database_unavailable', '2'],
    );
  });
});
