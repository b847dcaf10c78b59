// `Prefer: invalid=quarantine` against the real PostgreSQL: the valid items written, the invalid ones
// kept in quarantined_items by the same transaction, for JSON, NDJSON and CSV bodies; past the
// bound nothing written and nothing kept; a replay keeps nothing twice; no plaintext password kept
// or logged; a failure at the commit leaves neither the rows nor the items.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { makeUsers, uniqueTag } from '../../../test/support/users.js';

const QUARANTINE = { prefer: 'invalid=quarantine' };
const NDJSON = 'application/x-ndjson';
const CSV = 'text/csv';
const PLAINTEXT = 'correct-horse-battery-staple-';

/** @param {import('pg').Pool} pool @param {string} requestId */
async function keptFor(pool, requestId) {
  const { rows } = await pool.query(
    'SELECT client, format, position, line, reason, errors, item, csv_header FROM quarantined_items WHERE request_id = $1 ORDER BY position',
    [requestId],
  );
  return rows;
}

/** Everything quarantined_items holds, as one text. @param {import('pg').Pool} pool */
async function wholeQuarantine(pool) {
  const { rows } = await pool.query(
    "SELECT string_agg(q::text, E'\\n') AS all FROM quarantined_items q",
  );
  return rows[0].all ?? '';
}

describe('POST /users with Prefer: invalid=quarantine', () => {
  const ctx = useAppAndDatabase();

  test('JSON: the valid users written, each invalid item kept with its position, errors, client and request; counts exact', async () => {
    const good = makeUsers(3);
    const password = `${PLAINTEXT}${uniqueTag()}`;
    const bad = [
      { email: 'not-an-email', name: 'Bad Email' },
      { email: `pw-${uniqueTag()}@example.com`, name: 'Plain', password },
      42,
      { email: `nome-${uniqueTag()}@example.com`, nome: 'Typo' },
    ];
    const body = [good[0], bad[0], good[1], bad[1], bad[2], good[2], bad[3]];
    const res = await ctx.app.postUsers(body, { headers: QUARANTINE });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.headers.get('preference-applied'), 'invalid=quarantine');
    const { errors, ...counts } = res.body;
    assert.deepEqual(counts, {
      received: 7,
      inserted: 3,
      updated: 0,
      duplicates: 0,
      quarantined: 4,
    });
    assert.deepEqual(
      errors.map((/** @type {any} */ e) => [e.index, e.field]),
      [
        [1, 'email'],
        [3, 'password'],
        [4, null],
        [6, 'name'],
        [6, 'nome'],
      ],
    );
    assert.equal(counts.received, counts.inserted + counts.duplicates + counts.quarantined);

    const stored = await ctx.db.usersByEmail([...good.map((u) => u.email), bad[1].email]);
    assert.deepEqual(
      [...stored.keys()].sort(),
      good.map((u) => u.email).sort(),
      'the valid users, and only they',
    );
    const kept = await keptFor(
      ctx.db.pool,
      /** @type {string} */ (res.headers.get('x-request-id')),
    );
    assert.deepEqual(
      kept.map((k) => [k.client, k.format, k.position, k.line, k.reason]),
      [
        ['anonymous', 'json', 1, null, 'invalid_user'],
        ['anonymous', 'json', 3, null, 'invalid_user'],
        ['anonymous', 'json', 4, null, 'invalid_user'],
        ['anonymous', 'json', 6, null, 'invalid_user'],
      ],
    );
    assert.deepEqual(JSON.parse(kept[0].item), bad[0]);
    assert.deepEqual(JSON.parse(kept[1].item), { ...bad[1], password: '[redacted]' });
    assert.equal(kept[2].item, '42');
    assert.deepEqual(
      kept[3].errors.map((/** @type {any} */ e) => e.field),
      ['name', 'nome'],
    );
    assert.ok(
      !(await wholeQuarantine(ctx.db.pool)).includes(password),
      'no plaintext password in the quarantine',
    );
    assert.ok(!JSON.stringify(ctx.app.logs).includes(password), 'nor in the log');
    assert.ok(!JSON.stringify(ctx.app.logs).includes(PLAINTEXT), 'nor any part of it');

    // The same body again (a retry): nothing doubled, the same counts as any replay.
    const again = await ctx.app.postUsers(body, { headers: QUARANTINE });
    assert.equal(again.status, 200, again.text);
    assert.deepEqual(
      { ...again.body, errors: undefined },
      { received: 7, inserted: 0, updated: 0, duplicates: 3, quarantined: 4, errors: undefined },
    );
    const { rows } = await ctx.db.pool.query(
      'SELECT count(*)::int AS n FROM quarantined_items WHERE item = ANY($1)',
      [kept.map((k) => k.item)],
    );
    assert.equal(rows[0].n, 4, 'a replay keeps nothing twice');

    // Without the preference: today's answer, nothing kept.
    const before = await ctx.db.pool.query('SELECT count(*)::int AS n FROM quarantined_items');
    const refused = await ctx.app.postUsers(body);
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error, 'invalid_batch');
    assert.equal(refused.headers.get('preference-applied'), null);
    const after = await ctx.db.pool.query('SELECT count(*)::int AS n FROM quarantined_items');
    assert.equal(after.rows[0].n, before.rows[0].n);
  });

  test('an item set aside again in another body (a queue redelivers it in another chunk) is kept once, naming the latest request', async () => {
    const bad = { email: `again-${uniqueTag()}`, name: 'Again' };
    const first = await ctx.app.postUsers([...makeUsers(2), bad], { headers: QUARANTINE });
    const second = await ctx.app.postUsers([bad, bad, ...makeUsers(1)], { headers: QUARANTINE });
    assert.deepEqual(
      [first.body.quarantined, second.body.quarantined],
      [1, 2],
      'each answer counts what it set aside',
    );
    const { rows } = await ctx.db.pool.query(
      'SELECT request_id, position, times_seen FROM quarantined_items WHERE item = $1',
      [JSON.stringify(bad)],
    );
    assert.deepEqual(rows, [
      { request_id: second.headers.get('x-request-id'), position: 0, times_seen: 2 },
    ]);
  });

  test('JSON: a user that gives a key twice is set aside too, the rest written', async () => {
    const [good] = makeUsers(1);
    const twice = `{"email":"twice-${uniqueTag()}@example.com","name":"A","name":"B"}`;
    const res = await ctx.app.postUsers(`[${JSON.stringify(good)},${twice}]`, {
      headers: QUARANTINE,
    });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(res.body.errors, [
      {
        index: 1,
        field: 'name',
        message: 'is given more than once in this object; send each field once',
      },
    ]);
    assert.equal(res.body.quarantined, 1);
    const refused = await ctx.app.postUsers(`[${JSON.stringify(good)},${twice}]`);
    assert.deepEqual(
      [refused.status, refused.body.error],
      [400, 'invalid_batch'],
      'without the preference, as today',
    );
  });

  test("JSON without an invalid item: today's answer, with quarantined 0; grouped or not", async () => {
    const users = makeUsers(2);
    const res = await ctx.app.postUsers(users, { headers: QUARANTINE });
    assert.deepEqual(
      [res.status, res.body],
      [201, { received: 2, inserted: 2, updated: 0, duplicates: 0, quarantined: 0 }],
    );
    const plain = await ctx.app.postUsers(makeUsers(2));
    assert.deepEqual(
      plain.body,
      { received: 2, inserted: 2, updated: 0, duplicates: 0 },
      'without the preference, no quarantined',
    );
  });

  test('JSON: every item invalid, within the bound: 200, nothing written, all kept; merge mode keeps the identity', async () => {
    const all = await ctx.app.postUsers([{ email: 'x' }, { name: 'y' }], { headers: QUARANTINE });
    assert.equal(all.status, 200, all.text);
    assert.deepEqual(
      { ...all.body, errors: undefined },
      { received: 2, inserted: 0, updated: 0, duplicates: 0, quarantined: 2, errors: undefined },
    );
    assert.equal(
      (await keptFor(ctx.db.pool, /** @type {string} */ (all.headers.get('x-request-id')))).length,
      2,
    );

    const [stored, fresh] = makeUsers(2);
    await ctx.app.postUsers([stored]);
    const merged = await ctx.app.postUsers(
      [{ ...stored, name: 'Renamed' }, fresh, { email: 'bad' }],
      { headers: { prefer: 'resolution=merge-duplicates, invalid=quarantine' } },
    );
    assert.equal(merged.status, 201, merged.text);
    assert.equal(
      merged.headers.get('preference-applied'),
      'resolution=merge-duplicates, invalid=quarantine',
    );
    assert.deepEqual(
      { ...merged.body, errors: undefined },
      {
        received: 3,
        inserted: 1,
        updated: 1,
        stale: 0,
        duplicates: 1,
        quarantined: 1,
        errors: undefined,
      },
    );
  });

  test('NDJSON: a line not JSON, an invalid user, a key twice and a plaintext password kept with their lines; the rest written', async () => {
    const good = makeUsers(3);
    const password = `${PLAINTEXT}${uniqueTag()}`;
    const lines = [
      JSON.stringify(good[0]),
      '{"email": "broken@example.com", "name": ',
      JSON.stringify({ email: 'no-at', name: 'X' }),
      '',
      JSON.stringify(good[1]),
      `{"email":"twice-${uniqueTag()}@example.com","name":"A","name":"B"}`,
      `{"email":"pw-${uniqueTag()}@example.com","name":"P","password":"${password}"}`,
      `{"email":"cut@example.com","password":"${password}"`,
      JSON.stringify(good[2]),
    ];
    const res = await ctx.app.postUsers(lines.join('\n') + '\n', {
      contentType: NDJSON,
      headers: QUARANTINE,
    });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.headers.get('preference-applied'), 'invalid=quarantine');
    const { errors, ...counts } = res.body;
    assert.deepEqual(counts, {
      received: 8,
      inserted: 3,
      updated: 0,
      duplicates: 0,
      quarantined: 5,
    });
    assert.deepEqual(
      errors.map((/** @type {any} */ e) => [e.index, e.line]),
      [
        [1, 2],
        [2, 3],
        [4, 6],
        [5, 7],
        [6, 8],
      ],
    );
    assert.equal((await ctx.db.usersByEmail(good.map((u) => u.email))).size, 3);

    const kept = await keptFor(
      ctx.db.pool,
      /** @type {string} */ (res.headers.get('x-request-id')),
    );
    assert.deepEqual(
      kept.map((k) => [k.format, k.position, k.line, k.reason]),
      [
        ['ndjson', 1, 2, 'malformed_json'],
        ['ndjson', 2, 3, 'invalid_user'],
        ['ndjson', 4, 6, 'invalid_user'],
        ['ndjson', 5, 7, 'invalid_user'],
        ['ndjson', 6, 8, 'malformed_json'],
      ],
    );
    assert.equal(
      kept[0].item,
      `[not kept: line 2, ${lines[1].length} characters]`,
      'of a line not JSON, only where it was and its length',
    );
    assert.equal(kept[1].item, lines[2], 'an item as sent');
    assert.equal(kept[2].item, lines[5], 'a key given twice, as sent');
    assert.equal(JSON.parse(kept[3].item).password, '[redacted]');
    assert.equal(kept[4].item, `[not kept: line 8, ${lines[7].length} characters]`);
    const whole = await wholeQuarantine(ctx.db.pool);
    assert.ok(!whole.includes(password), 'no plaintext password in the quarantine');
    assert.ok(!JSON.stringify(ctx.app.logs).includes(password), 'nor in the log');
  });

  test('a long stream keeps its items as it goes (between chunks), all of them, with the rest written', async () => {
    const users = makeUsers(20_000);
    const lines = users.map((u) => JSON.stringify(u));
    // The first five hold over QUARANTINE_KEEP_CHARS: kept at the first chunk's end; the last at the body's.
    const bad = [10, 11, 12, 13, 14, 19_000];
    for (const at of bad)
      lines[at] = JSON.stringify({
        ...users[at],
        email: `bad-${at}`,
        name: 'x'.repeat(60_000) + at,
      });
    const res = await ctx.app.postUsers(`${lines.join('\n')}\n`, {
      contentType: NDJSON,
      headers: QUARANTINE,
    });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(
      { ...res.body, errors: undefined },
      {
        received: 20_000,
        inserted: 19_994,
        updated: 0,
        duplicates: 0,
        quarantined: 6,
        errors: undefined,
      },
    );
    const kept = await keptFor(
      ctx.db.pool,
      /** @type {string} */ (res.headers.get('x-request-id')),
    );
    assert.deepEqual(
      kept.map((k) => [k.position, k.line]),
      bad.map((at) => [at, at + 1]),
    );
  });

  test('an item twice in one long stream, kept by two statements of its transaction: one row, its first place, seen once a request', async () => {
    const users = makeUsers(20_000);
    const lines = users.map((u) => JSON.stringify(u));
    // The first five hold over QUARANTINE_KEEP_CHARS: kept at the first chunk's end; the sixth, line 10 again, at the body's.
    const bad = [10, 11, 12, 13, 14];
    for (const at of bad)
      lines[at] = JSON.stringify({ email: `twice-${uniqueTag()}-${at}`, name: 'x'.repeat(60_000) });
    lines[19_000] = lines[10];
    const body = `${lines.join('\n')}\n`;
    const seen = async () =>
      (
        await ctx.db.pool.query(
          'SELECT request_id, position, line, times_seen FROM quarantined_items WHERE item = $1',
          [lines[10]],
        )
      ).rows;
    const res = await ctx.app.postUsers(body, { contentType: NDJSON, headers: QUARANTINE });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.quarantined, 6, 'the answer counts each line it set aside');
    assert.deepEqual(await seen(), [
      { request_id: res.headers.get('x-request-id'), position: 10, line: 11, times_seen: 1 },
    ]);
    const again = await ctx.app.postUsers(body, { contentType: NDJSON, headers: QUARANTINE });
    assert.equal(again.body.quarantined, 6);
    assert.deepEqual(
      await seen(),
      [{ request_id: again.headers.get('x-request-id'), position: 10, line: 11, times_seen: 2 }],
      'another request counts once more',
    );
  });

  test('CSV: a record of another field count and an invalid user kept with their lines and the header; the rest written', async () => {
    const [a, b] = makeUsers(2);
    const body = `email,name\r\n${a.email},A\r\nbad-email,B\r\nthree,fields,here\r\n${b.email},"Quoted, B"\r\n`;
    const res = await ctx.app.postUsers(body, { contentType: CSV, headers: QUARANTINE });
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(
      { ...res.body, errors: undefined },
      { received: 4, inserted: 2, updated: 0, duplicates: 0, quarantined: 2, errors: undefined },
    );
    const kept = await keptFor(
      ctx.db.pool,
      /** @type {string} */ (res.headers.get('x-request-id')),
    );
    assert.deepEqual(
      kept.map((k) => [k.format, k.position, k.line, k.reason, k.item, k.csv_header]),
      [
        ['csv', 1, 3, 'invalid_user', 'bad-email,B', 'email,name'],
        ['csv', 2, 4, 'malformed_csv', '[not kept: line 4, 17 characters]', 'email,name'],
      ],
    );
    // A request error is refused whole as before: an unknown column.
    const unknown = await ctx.app.postUsers('email,name,password\r\nz@example.com,Z,secret\r\n', {
      contentType: CSV,
      headers: QUARANTINE,
    });
    assert.deepEqual([unknown.status, unknown.body.error], [400, 'malformed_csv']);
  });

  test('past the bound (max-invalid, or the default 100): refused as today, nothing written, nothing kept', async () => {
    const count = async () =>
      (await ctx.db.pool.query('SELECT count(*)::int AS n FROM quarantined_items')).rows[0].n;
    const before = await count();
    const [good] = makeUsers(1);
    const json = await ctx.app.postUsers([good, { email: 'a' }, { email: 'b' }], {
      headers: { prefer: 'invalid=quarantine; max-invalid=1' },
    });
    assert.equal(json.status, 400, json.text);
    assert.equal(json.body.error, 'invalid_batch');
    assert.match(json.body.message, /^2 of 3 users are invalid, more than the 1 /);
    assert.deepEqual(
      json.body.errors.map((/** @type {any} */ e) => e.index),
      [1, 1, 2, 2],
      'every problem named, as today',
    );

    const lines = [
      JSON.stringify(good),
      ...Array.from({ length: 101 }, (_, i) => `not json ${i}`),
    ].join('\n');
    const stream = await ctx.app.postUsers(lines, { contentType: NDJSON, headers: QUARANTINE });
    assert.equal(stream.status, 400, stream.text);
    assert.equal(stream.body.error, 'invalid_batch');
    assert.equal(stream.body.errors.length, 100);
    const csv = await ctx.app.postUsers(`email,name\n${good.email},G\nx\ny\n`, {
      contentType: CSV,
      headers: { prefer: 'invalid=quarantine;max-invalid=0' },
    });
    assert.equal(csv.status, 400, csv.text);

    assert.equal((await ctx.db.usersByEmail([good.email])).size, 0, 'nothing written');
    assert.equal(await count(), before, 'nothing kept');
    // Exactly at the bound: set aside.
    const at = await ctx.app.postUsers([good, { email: 'a' }], {
      headers: { prefer: 'invalid=quarantine; max-invalid=1' },
    });
    assert.equal(at.status, 201, at.text);
  });

  test('a value of invalid or max-invalid that cannot be honoured: 400 unsupported_preference, before the body', async () => {
    for (const prefer of [
      'invalid=skip',
      'invalid=quarantine; max-invalid=-1',
      'invalid=quarantine; max-invalid=10001',
      'invalid=quarantine; maximum=3',
    ]) {
      const res = await ctx.app.postUsers(makeUsers(1), { headers: { prefer } });
      assert.deepEqual([res.status, res.body.error], [400, 'unsupported_preference'], prefer);
    }
  });

  test('a small request with an item set aside joins a group like any other, its items kept with the group', async () => {
    const scrape = async () => (await fetch(`${ctx.app.baseUrl}/metrics`)).text();
    const grouped = (/** @type {string} */ text) =>
      Number(/^sluice_group_commit_requests_sum (\d+)/m.exec(text)?.[1] ?? 0);
    const before = grouped(await scrape());
    const valid = makeUsers(2);
    const withBad = [...makeUsers(2), { email: `bad-${uniqueTag()}`, name: 'Bad' }];
    const [a, b] = await Promise.all([
      ctx.app.postUsers(valid),
      ctx.app.postUsers(withBad, { headers: QUARANTINE }),
    ]);
    assert.equal(a.status, 201, a.text);
    assert.equal(b.status, 201, b.text);
    assert.equal(b.body.quarantined, 1);
    assert.equal(grouped(await scrape()) - before, 2, 'both written by group commit');
    const kept = await keptFor(ctx.db.pool, /** @type {string} */ (b.headers.get('x-request-id')));
    assert.equal(kept.length, 1);
    assert.equal((await ctx.db.usersByEmail([...valid, ...withBad].map((u) => u.email))).size, 4);
  });

  test('the metric counts what was set aside, by reason', async () => {
    const scrape = async () => (await fetch(`${ctx.app.baseUrl}/metrics`)).text();
    const value = (/** @type {string} */ text, /** @type {string} */ reason) =>
      Number(
        new RegExp(`^sluice_users_quarantined_total\\{reason="${reason}"\\} (\\d+)`, 'm').exec(
          text,
        )?.[1],
      );
    const before = await scrape();
    await ctx.app.postUsers('{"email"\n{"email":"q"}\n', {
      contentType: NDJSON,
      headers: QUARANTINE,
    });
    const after = await scrape();
    assert.equal(value(after, 'malformed_json') - value(before, 'malformed_json'), 1);
    assert.equal(value(after, 'invalid_user') - value(before, 'invalid_user'), 1);
  });
});

describe('a quarantining write that fails at its commit keeps neither its rows nor its items', () => {
  const ctx = useAppAndDatabase();

  test('JSON and NDJSON: the deferred failure after the items were inserted rolls back both', async () => {
    // Fires at COMMIT, after the users and the quarantined items are in: the last moment a write can fail.
    await ctx.db.pool.query(`
      CREATE FUNCTION refuse_kept() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.item LIKE '%fail-at-commit%' THEN RAISE EXCEPTION 'refused at commit' USING ERRCODE = 'P0001'; END IF;
        RETURN NEW;
      END $$;
      CREATE CONSTRAINT TRIGGER refuse_kept AFTER INSERT ON quarantined_items DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_kept();`);
    const good = makeUsers(3);
    const json = await ctx.app.postUsers([...good, { email: 'fail-at-commit' }], {
      headers: QUARANTINE,
    });
    assert.equal(json.status, 500, json.text);
    const ndjson = await ctx.app.postUsers(
      `${good.map((u) => JSON.stringify(u)).join('\n')}\n{"email":"fail-at-commit"}\n`,
      { contentType: NDJSON, headers: QUARANTINE },
    );
    assert.equal(ndjson.status, 500, ndjson.text);
    const many = makeUsers(16_000);
    // Its first items (over QUARANTINE_KEEP_CHARS) kept between chunks, long before the failure.
    const early = Array.from({ length: 5 }, (_, i) =>
      JSON.stringify({ email: `early-${i}`, name: 'x'.repeat(60_000) }),
    ).join('\n');
    const long = await ctx.app.postUsers(
      `${early}\nxxx\n${many.map((u) => JSON.stringify(u)).join('\n')}\n{"email":"fail-at-commit"}\n`,
      { contentType: NDJSON, headers: QUARANTINE },
    );
    assert.equal(long.status, 500, long.text);
    const merge = await ctx.app.postUsers(
      `${good.map((u) => JSON.stringify(u)).join('\n')}\n{"email":"fail-at-commit"}\n`,
      {
        contentType: NDJSON,
        headers: { prefer: 'invalid=quarantine, resolution=merge-duplicates' },
      },
    );
    assert.equal(merge.status, 500, merge.text);
    assert.equal(await ctx.db.countUsers(), 0, 'no row written');
    const { rows } = await ctx.db.pool.query('SELECT count(*)::int AS n FROM quarantined_items');
    assert.equal(rows[0].n, 0, 'no item kept');
  });
});
