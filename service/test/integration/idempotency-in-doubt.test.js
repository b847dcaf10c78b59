import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useAppBehindToxiproxy } from '../../../test/support/fixture.js';
import { makeUsers, uniqueTag } from '../../../test/support/users.js';
import { within } from '../../../test/support/time-factor.js';
import { waitUntil } from '../../../test/support/wait.js';

// A write with an Idempotency-Key whose COMMIT was sent and whose answer was withheld (Toxiproxy,
// as outcome-in-doubt.test.js): 503 outcome_unknown, and a retry with the key gets the answer that
// was committed with the rows (with `Prefer: invalid=quarantine`, JSON and NDJSON: the items set aside
// kept once, by the lost attempt, the retries touching none). One whose COMMIT was never sent (a batch
// written alone, its claim unanswered): nothing committed, and the retry writes.
// A deferred trigger holds each COMMIT of a key a moment, so the answer can be withheld after it went.

const HOLD_COMMIT = `
  CREATE FUNCTION hold_commit() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN IF NEW.key LIKE 'hold-%' AND NEW.fingerprint IS NOT NULL THEN PERFORM pg_sleep(1); END IF; RETURN NULL; END $$;
  CREATE CONSTRAINT TRIGGER hold_commit AFTER INSERT OR UPDATE ON idempotency_keys DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION hold_commit();`;

describe('Idempotency-Key when the answer of the commit is lost', () => {
  const ctx = useAppBehindToxiproxy({ DB_CONNECT_TIMEOUT_MS: '1000' });
  const committing = async () =>
    (
      await ctx.db.pool.query(
        "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event = 'PgSleep'",
      )
    ).rows[0].n;

  const cases = /** @type {const} */ ([
    ['a single user (group commit)', 1, true],
    ["a single user in its group's one statement (no representation)", 1, false],
    ['a 500-user batch', 500, true],
    ['a 2,500-user batch (three chunks)', 2500, true],
  ]);
  for (const [label, count, withRows] of cases) {
    test(`${label}: 503 outcome_unknown, then the retry with the key gets the committed answer, replayed`, async () => {
      await ctx.db.pool.query(
        `DROP TRIGGER IF EXISTS hold_commit ON idempotency_keys; DROP FUNCTION IF EXISTS hold_commit(); ${HOLD_COMMIT}`,
      );
      const key = `hold-${uniqueTag()}`;
      const users = makeUsers(count);
      const headers = {
        'idempotency-key': `"${key}"`,
        ...(withRows ? { prefer: 'return=representation' } : {}),
      };
      const first = ctx.app.postUsers(users, { headers });
      await waitUntil(
        async () => (await committing()) === 1,
        'the COMMIT to be under way',
        within(5000),
        10,
      );
      await ctx.proxy.withhold('downstream');
      const lost = await first;
      assert.equal(lost.status, 503, lost.text);
      assert.equal(lost.body.error, 'outcome_unknown');
      assert.match(lost.body.message, /retry with the same Idempotency-Key/);
      await ctx.proxy.heal();
      await waitUntil(
        async () => (await fetch(`${ctx.app.baseUrl}/readyz`)).status === 200,
        '/readyz to answer 200 again',
        within(10_000),
        100,
      );
      await waitUntil(
        async () => (await committing()) === 0,
        'the COMMIT to end',
        within(5000),
        20,
      );

      const { rows } = await ctx.db.pool.query(
        "SELECT (outcome->'written'->>'inserted')::int AS inserted FROM idempotency_keys WHERE key = $1",
        [key],
      );
      assert.deepEqual(rows, [{ inserted: count }], 'the outcome was committed with the rows');
      assert.equal((await ctx.db.usersByEmail(users.map((u) => u.email))).size, count);
      const retry = await ctx.app.postUsers(users, { headers });
      assert.equal(retry.status, 201, retry.text);
      assert.equal(retry.headers.get('idempotent-replayed'), 'true');
      if (withRows)
        assert.equal(
          JSON.parse(retry.text).length,
          count,
          'the rows the lost attempt wrote, not []',
        );
      else assert.equal(retry.body.inserted, count, "the lost attempt's count, not 0");
    });
  }

  for (const [label, contentType] of /** @type {const} */ ([
    ['JSON', 'application/json'],
    ['NDJSON', 'application/x-ndjson'],
  ])) {
    test(`${label} with Prefer: invalid=quarantine: the retry gets the committed answer; each invalid item kept once, by the lost attempt`, async () => {
      await ctx.db.pool.query(
        `DROP TRIGGER IF EXISTS hold_commit ON idempotency_keys; DROP FUNCTION IF EXISTS hold_commit(); ${HOLD_COMMIT}`,
      );
      const tag = uniqueTag();
      const key = `hold-q-${tag}`;
      const users = makeUsers(200, tag);
      const bad = Array.from({ length: 3 }, (_, i) => ({ email: `lost-${tag}-${i}`, name: 'X' }));
      const items = [...users.slice(0, 100), ...bad, ...users.slice(100)];
      const body =
        contentType === 'application/json' ? items : items.map((u) => JSON.stringify(u)).join('\n');
      const headers = { 'idempotency-key': `"${key}"`, prefer: 'invalid=quarantine' };
      const first = ctx.app.postUsers(body, { contentType, headers });
      await waitUntil(
        async () => (await committing()) === 1,
        'the COMMIT to be under way',
        within(5000),
        10,
      );
      await ctx.proxy.withhold('downstream');
      const lost = await first;
      assert.deepEqual([lost.status, lost.body.error], [503, 'outcome_unknown'], lost.text);
      await ctx.proxy.heal();
      await waitUntil(
        async () => (await fetch(`${ctx.app.baseUrl}/readyz`)).status === 200,
        '/readyz to answer 200 again',
        within(10_000),
        100,
      );
      await waitUntil(
        async () => (await committing()) === 0,
        'the COMMIT to end',
        within(5000),
        20,
      );

      const keptBy = async () =>
        (
          await ctx.db.pool.query(
            'SELECT request_id, times_seen, position FROM quarantined_items WHERE item LIKE $1 ORDER BY position',
            [`%lost-${tag}-%`],
          )
        ).rows;
      const lostId = lost.headers.get('x-request-id');
      const expected = [100, 101, 102].map((position) => ({
        request_id: lostId,
        times_seen: 1,
        position,
      }));
      assert.deepEqual(await keptBy(), expected, 'kept by the attempt whose answer was lost');
      /** @type {string | undefined} */
      let replayed;
      for (let attempt = 0; attempt < 2; attempt++) {
        const retry = await ctx.app.postUsers(body, { contentType, headers });
        assert.equal(retry.status, 201, retry.text);
        assert.equal(retry.headers.get('idempotent-replayed'), 'true');
        assert.equal(retry.text, replayed ?? retry.text, 'the same answer, byte for byte');
        replayed = retry.text;
        assert.deepEqual(
          { ...retry.body, errors: undefined },
          {
            received: 203,
            inserted: 200,
            updated: 0,
            duplicates: 0,
            quarantined: 3,
            errors: undefined,
          },
        );
      }
      assert.deepEqual(await keptBy(), expected, 'the retries kept nothing, touched nothing');
      assert.equal((await ctx.db.usersByEmail(users.map((u) => u.email))).size, 200);
    });
  }

  // A batch written alone claims its key in BEGIN's round trip; a small request without
  // representation goes in its group's one statement, which commits itself (the case above).
  test('the COMMIT never sent (answers withheld from the start): nothing committed, and the retry writes', async () => {
    const key = `never-${uniqueTag()}`;
    const users = makeUsers(150);
    await ctx.proxy.withhold('downstream');
    const lost = await ctx.app.postUsers(users, { headers: { 'idempotency-key': `"${key}"` } });
    await ctx.proxy.heal();
    assert.equal(lost.status, 503, lost.text);
    assert.equal(
      lost.body.error,
      'database_unavailable',
      "the claim's round trip went unanswered: provably nothing written",
    );
    await waitUntil(
      async () => (await fetch(`${ctx.app.baseUrl}/readyz`)).status === 200,
      '/readyz to answer 200 again',
      within(10_000),
      100,
    );
    await waitUntil(
      async () =>
        (await ctx.db.pool.query('SELECT 1 FROM idempotency_keys WHERE key = $1', [key]))
          .rowCount === 0 &&
        (
          await ctx.db.pool.query(
            "SELECT 1 FROM pg_stat_activity WHERE application_name = 'sluice' AND state LIKE 'idle in transaction%'",
          )
        ).rowCount === 0,
      'the lost transaction to be rolled back',
      within(10_000),
      100,
    );
    const retry = await ctx.app.postUsers(users, { headers: { 'idempotency-key': `"${key}"` } });
    assert.equal(retry.status, 201, retry.text);
    assert.equal(retry.headers.get('idempotent-replayed'), null);
    assert.equal(retry.body.inserted, 150);
  });
});
