// `Prefer: invalid=quarantine` against hostile clients with valid credentials: no plaintext
// password kept however it is spelled, a kept item and a client's rows bounded, old rows purged by
// the service, rows scoped by the credential's kind and name, requests named by the service's ids,
// and no byte in a bad item that fails the good ones. Each: the answers (and how long), the table
// afterwards, the log (no secret, no email of a bad item).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { SignJWT } from 'jose';
import { startTestApp } from '../../../test/support/app.js';
import { runNode } from '../../../test/support/child-process.js';
import { createTestDatabase } from '../../../test/support/database.js';
import { within } from '../../../test/support/time-factor.js';
import { makeUsers, uniqueTag } from '../../../test/support/users.js';

const CLI = fileURLToPath(new URL('../../../scripts/quarantine.js', import.meta.url));
const NDJSON = 'application/x-ndjson';
const CSV = 'text/csv';
const QUARANTINE = { prefer: 'invalid=quarantine' };
const TOKENS = {
  bob: 'bob-token-0123456789abcdef',
  alice: 'alice-token-0123456789abcdef',
  mallory: 'mallory-token-0123456789abcdef',
  filler: 'filler-token-0123456789abcdef',
};
const JWT_SECRET = `quarantine-hostile-${'s'.repeat(32)}`;
const CLIENT_MAX_BYTES = 4 * 1024 * 1024;
/** In every secret and every bad item's email of this file: none may be kept or logged. */
const MARK = `hostile${uniqueTag()}`;

describe('Prefer: invalid=quarantine against hostile clients with valid credentials', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
  before(async () => {
    db = await createTestDatabase();
    app = await startTestApp({
      databaseUrl: db.url,
      env: {
        INGEST_TOKENS: JSON.stringify(TOKENS),
        JWT_SECRET,
        QUARANTINE_CLIENT_MAX_BYTES: String(CLIENT_MAX_BYTES),
        LOG_LEVEL: 'debug',
      },
    });
  });
  after(async () => {
    const logs = JSON.stringify(app?.logs ?? []);
    await app?.close();
    await db?.drop();
    assert.ok(!logs.includes(MARK), 'no secret, no bad item, no email of one in the log');
  });

  /** A POST timed: its answer and how long it took. @param {unknown} body @param {Parameters<typeof app.postUsers>[1]} options */
  async function post(body, options) {
    const started = performance.now();
    const res = await app.postUsers(body, options);
    return { ...res, ms: performance.now() - started };
  }
  /** @param {string} sql @param {unknown[]} [values] */
  const query = async (sql, values) => (await db.pool.query(sql, values)).rows;
  const wholeTable = async () =>
    (
      await query("SELECT coalesce(string_agg(q::text, E'\\n'), '') AS t FROM quarantined_items q")
    )[0].t;
  /** @param {string[]} args */
  async function cli(args) {
    const child = runNode([CLI, ...args], { env: { ...process.env, DATABASE_URL: db.url } });
    return { code: await child.exited, stdout: child.out(), stderr: child.err() };
  }

  test('a password kept by no spelling: an escaped key, a passwordHash that is no hash, a line that is not JSON; NDJSON, CSV, JSON', async () => {
    const secret = (/** @type {number} */ n) => `${MARK}-secret-${n}`;
    const good = makeUsers(3);
    const lines = [
      JSON.stringify(good[0]),
      `{"email":"${MARK}-1","name":"A","p\\u0061ssword":"${secret(1)}"}`,
      `{"email":"${MARK}-2","name":"B","passwordHash":"${secret(2)}"}`,
      `{"email":"${MARK}-3@example.com","password":"${secret(3)}"`,
      `{"p\\u0061ssword":"${secret(4)}", not json}`,
      `{"email":"${MARK}-5","name":"C","\\u0050assword":{"deep":"${secret(5)}"}}`,
    ];
    const ndjson = await post(`${lines.join('\n')}\n`, {
      contentType: NDJSON,
      token: TOKENS.bob,
      headers: QUARANTINE,
    });
    const csv = await post(
      `email,name,passwordHash\r\n${good[1].email},B,\r\n${MARK}-6,C,${secret(6)}\r\n${MARK}-7,D,${secret(7)},extra\r\n`,
      { contentType: CSV, token: TOKENS.bob, headers: QUARANTINE },
    );
    const json = await post(
      [
        good[2],
        { email: `${MARK}-8`, name: 'E', passwordHash: secret(8) },
        { email: `${MARK}-9`, name: 'F', nested: [{ PassWord: secret(9) }] },
      ],
      { token: TOKENS.bob, headers: QUARANTINE },
    );
    for (const [res, quarantined] of /** @type {const} */ ([
      [ndjson, 5],
      [csv, 2],
      [json, 2],
    ])) {
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.quarantined, quarantined);
      assert.ok(res.ms < within(2000), `answered in ${res.ms} ms`);
    }
    assert.equal(
      (await db.usersByEmail(good.map((u) => u.email))).size,
      3,
      'the good ones written',
    );
    const table = await wholeTable();
    assert.equal((await query('SELECT count(*)::int AS n FROM quarantined_items'))[0].n, 9);
    for (let n = 1; n <= 9; n++) assert.ok(!table.includes(secret(n)), `secret ${n} not kept`);
    assert.ok(!table.includes('secret-'), 'nor any part of one');
    const items = await query(
      "SELECT reason, item FROM quarantined_items WHERE client_scope = 'token:bob' ORDER BY id",
    );
    assert.equal(JSON.parse(items[0].item)['p\u0061ssword'], '[redacted]', 'the key, unescaped');
    assert.equal(JSON.parse(items[1].item).passwordHash, '[redacted]');
    assert.match(items[2].item, /^\[not kept: line 4, \d+ characters\]$/);
    assert.match(items[5].item, /^"[^"]+","C","\[redacted\]"$/, 'a CSV record written again');
  });

  test('an item is kept cut at 64 KiB, marked; a 5 MB name is not kept whole', async () => {
    const [good] = makeUsers(1);
    const res = await post([good, { email: `${MARK}-big`, name: 'n'.repeat(5_000_000) }], {
      token: TOKENS.alice,
      headers: QUARANTINE,
    });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.quarantined, 1);
    assert.ok(res.ms < within(3000), `answered in ${res.ms} ms`);
    const [row] = await query(
      'SELECT length(item) AS chars, octet_length(item) AS bytes, truncated FROM quarantined_items WHERE request_id = $1',
      [res.headers.get('quarantine-request-id')],
    );
    assert.deepEqual(row, { chars: 64 * 1024, bytes: 64 * 1024, truncated: true });
    assert.equal((await db.usersByEmail([good.email])).size, 1);
  });

  test('a stream whose set-aside text unkept passes 1 MiB is refused: nothing written, nothing kept', async () => {
    const before = (await query('SELECT count(*)::int AS n FROM quarantined_items'))[0].n;
    const good = makeUsers(2);
    // Merge mode keeps its items at its end only: twenty lines of 60,000 characters are held at once.
    const bad = Array.from({ length: 20 }, (_, i) =>
      JSON.stringify({ email: `${MARK}-held-${i}`, name: 'h'.repeat(60_000) }),
    );
    const res = await post(
      `${[JSON.stringify(good[0]), ...bad, JSON.stringify(good[1])].join('\n')}\n`,
      {
        contentType: NDJSON,
        token: TOKENS.alice,
        headers: { prefer: 'invalid=quarantine, resolution=merge-duplicates' },
      },
    );
    assert.deepEqual([res.status, res.body?.error], [400, 'invalid_batch'], res.text);
    assert.ok(res.ms < within(3000), `answered in ${res.ms} ms`);
    assert.equal((await db.usersByEmail(good.map((u) => u.email))).size, 0, 'nothing written');
    assert.equal((await query('SELECT count(*)::int AS n FROM quarantined_items'))[0].n, before);
  });

  test("past QUARANTINE_CLIENT_MAX_BYTES a client's new bad items are refused (400, nothing written); its replays and other clients are not", async () => {
    /** @param {number} r */
    const body = (r) => [
      ...makeUsers(1),
      ...Array.from({ length: 20 }, (_, i) => ({
        email: `${MARK}-fill-${r}-${i}`,
        name: 'f'.repeat(60_000),
      })),
    ];
    const sent = [body(1), body(2), body(3), body(4)];
    const answers = [];
    for (const b of sent)
      answers.push(await post(b, { token: TOKENS.filler, headers: QUARANTINE }));
    assert.deepEqual(
      answers.map((a) => a.status),
      [201, 201, 201, 400],
      'three requests of 1.2 MB fit in 4 MiB, a fourth does not',
    );
    assert.equal(answers[3].body.error, 'invalid_batch');
    assert.match(answers[3].body.message, /QUARANTINE_CLIENT_MAX_BYTES/);
    for (const a of answers) assert.ok(a.ms < within(3000), `answered in ${a.ms} ms`);
    const refusedGood = /** @type {{ email: string }} */ (sent[3][0]).email;
    assert.equal(
      (await db.usersByEmail([refusedGood])).size,
      0,
      'the refused request wrote nothing',
    );
    const [kept] = await query(
      "SELECT count(*)::int AS n, sum(octet_length(item))::int AS bytes FROM quarantined_items WHERE client_scope = 'token:filler'",
    );
    assert.equal(kept.n, 60);
    assert.ok(kept.bytes <= CLIENT_MAX_BYTES);

    const replay = await post(sent[0], { token: TOKENS.filler, headers: QUARANTINE });
    assert.equal(replay.status, 200, 'items kept already are not new: a replay is answered');
    const other = await post(body(5), { token: TOKENS.mallory, headers: QUARANTINE });
    assert.equal(other.status, 201, 'another client has its own bound');
  });

  test('the service purges rows older than QUARANTINE_RETENTION_DAYS (30) by itself, counted in a metric', async () => {
    await query(
      "UPDATE quarantined_items SET received_at = now() - interval '31 days' WHERE client_scope = 'token:filler'",
    );
    await query(
      "UPDATE quarantined_items SET received_at = now() - interval '29 days' WHERE client_scope = 'token:mallory'",
    );
    const metric = async () =>
      Number(
        /^sluice_quarantine_purged_total (\d+)$/m.exec(await app.metrics.registry.metrics())?.[1],
      );
    const before = await metric();
    assert.equal(await app.purgeQuarantine(), 60);
    assert.equal(await metric(), before + 60);
    const left = await query(
      'SELECT client_scope, count(*)::int AS n FROM quarantined_items WHERE client_scope IN ($1, $2) GROUP BY 1',
      ['token:filler', 'token:mallory'],
    );
    assert.deepEqual(left, [{ client_scope: 'token:mallory', n: 20 }]);
  });

  test("rows scoped by the credential's kind and name: a JWT whose sub is bob never touches token bob's rows; list --client", async () => {
    const jwt = await new SignJWT({ role: 'writer', sub: 'bob' })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime('10m')
      .sign(new TextEncoder().encode(JWT_SECRET));
    const bad = [{ email: `${MARK}-scoped`, name: 'Scoped' }];
    const byToken = await post(bad, { token: TOKENS.bob, headers: QUARANTINE });
    const byJwt = await post(bad, { token: jwt, headers: QUARANTINE });
    assert.deepEqual([byToken.status, byJwt.status], [200, 200]);
    const rows = await query(
      'SELECT client_scope, client, request_id, times_seen FROM quarantined_items WHERE item = $1 ORDER BY client_scope',
      [JSON.stringify(bad[0])],
    );
    assert.deepEqual(rows, [
      {
        client_scope: 'jwt:bob',
        client: 'bob',
        request_id: byJwt.headers.get('quarantine-request-id'),
        times_seen: 1,
      },
      {
        client_scope: 'token:bob',
        client: 'bob',
        request_id: byToken.headers.get('quarantine-request-id'),
        times_seen: 1,
      },
    ]);
    const day = new Date().toISOString().slice(0, 10);
    const both = await cli(['list', '--client', 'bob']);
    assert.equal(both.code, 0, both.stderr);
    assert.deepEqual(both.stdout.trim().split('\n').slice(1), [
      `${day}\tjwt:bob\tinvalid_user\t1`,
      `${day}\ttoken:bob\tinvalid_user\t7`,
      `${day}\ttoken:bob\tmalformed_csv\t1`,
      `${day}\ttoken:bob\tmalformed_json\t2`,
    ]);
    const one = await cli(['list', '--client', 'jwt:bob']);
    assert.deepEqual(one.stdout.trim().split('\n').slice(1), [`${day}\tjwt:bob\tinvalid_user\t1`]);
  });

  test("a client's X-Request-Id is kept beside, never the key: another's id does not put items in its export", async () => {
    const aliceItem = { email: `${MARK}-alice`, name: 'Alice' };
    const alice = await post([aliceItem], { token: TOKENS.alice, headers: QUARANTINE });
    const id = /** @type {string} */ (alice.headers.get('quarantine-request-id'));
    assert.equal(alice.headers.get('x-request-id'), id, 'without an id of its own: the same');
    const mallory = await post([{ email: `${MARK}-mallory`, name: 'Mallory' }], {
      token: TOKENS.mallory,
      headers: { ...QUARANTINE, 'x-request-id': id },
    });
    assert.equal(mallory.status, 200, mallory.text);
    assert.equal(mallory.headers.get('x-request-id'), id, 'its own id, echoed for its logs');
    assert.notEqual(mallory.headers.get('quarantine-request-id'), id);
    const [row] = await query(
      "SELECT request_id, client_request_id FROM quarantined_items WHERE client_scope = 'token:mallory' AND item LIKE '%-mallory%'",
    );
    assert.deepEqual(row, {
      request_id: mallory.headers.get('quarantine-request-id'),
      client_request_id: id,
    });
    const exported = await cli(['export', '--items', '--request', id]);
    assert.equal(exported.code, 0, exported.stderr);
    assert.equal(exported.stdout, `${JSON.stringify(aliceItem)}\n`, "alice's item, and only hers");
  });

  test('a NUL or a lone surrogate in a bad item never fails the good ones: NDJSON, CSV, JSON', async () => {
    const good = makeUsers(3);
    const ndjson = await post(
      `${JSON.stringify(good[0])}\n{"email":"${MARK}-nul\u0000","name":"N"}\n{"email":"${MARK}-n2","na\\u0000me":"x"}\n`,
      { contentType: NDJSON, token: TOKENS.alice, headers: QUARANTINE },
    );
    const csv = await post(
      `email,name\r\n${good[1].email},Good\r\n${MARK}-c1,Na\u0000me\r\n${MARK}-c2,x\u0000,extra\r\n`,
      { contentType: CSV, token: TOKENS.alice, headers: QUARANTINE },
    );
    const json = await post(
      `[${JSON.stringify(good[2])},{"email":"${MARK}-j1","name":"a\\u0000b"},{"email":"${MARK}-j2","\\u0000":"x","\\ud800":"y"}]`,
      { token: TOKENS.alice, headers: QUARANTINE },
    );
    for (const [res, quarantined] of /** @type {const} */ ([
      [ndjson, 2],
      [csv, 2],
      [json, 2],
    ])) {
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.quarantined, quarantined);
      assert.ok(res.ms < within(2000), `answered in ${res.ms} ms`);
    }
    assert.equal(
      (await db.usersByEmail(good.map((u) => u.email))).size,
      3,
      'the good ones written',
    );
    const rows = await query(
      'SELECT item, errors FROM quarantined_items WHERE request_id = ANY($1) ORDER BY id',
      [[ndjson, csv, json].map((r) => r.headers.get('quarantine-request-id'))],
    );
    assert.equal(rows.length, 6, 'each bad item kept');
    assert.ok(
      rows.some((r) => r.item.includes('\uFFFD')),
      'a raw NUL kept as U+FFFD',
    );
  });
});
