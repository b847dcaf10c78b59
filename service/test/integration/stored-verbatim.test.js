import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { startTestApp } from '../../../test/support/app.js';
import { useAppAndDatabase } from '../../../test/support/fixture.js';
import { WRITE_VARIANTS } from '../../../test/support/write-variants.js';
import { uniqueTag } from '../../../test/support/users.js';

// Names that would break naive quoting, or a format string, or a client encoding.
const TRICKY_NAMES = [
  "'); DROP TABLE users;--",
  "O'Brien \"the\" ''quoted''",
  'back\\slash \\\\ \\x00 \\n',
  "$1 $2::text %L %I %s %% E'\\'",
  '😀 emoji 👩‍👩‍👧‍👦 and 𝔘𝔫𝔦𝔠𝔬𝔡𝔢',
  'مرحبا بالعالم שלום',
  '‮right-to-left override‬ and zero​width',
  'ñandú Ωmega 漢字 ひらがな',
];
// A realistic PHC string: the schema checks a hash's shape, so the tricky characters are the names'.
const HASH = '$argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$aGFzaGhhc2hoYXNo';

/** The tricky names `copies` times over, each user with an email of its own. @param {number} copies */
function trickyUsers(copies) {
  const tag = uniqueTag();
  return Array.from({ length: copies }, (_, c) =>
    TRICKY_NAMES.map((name, i) => ({
      email: `tricky-${tag}-${c}-${i}@example.com`,
      name,
      passwordHash: HASH,
    })),
  ).flat();
}

/**
 * Records the rows of every INSERT or COPY into users, one line per statement, with a trigger in
 * this test's database: what the writer really sent, whatever the strategy.
 * @param {import('pg').Pool} pool
 */
async function recordInsertStatements(pool) {
  await pool.query(`
    CREATE TABLE insert_statements (id serial PRIMARY KEY, rows int NOT NULL);
    CREATE FUNCTION record_insert_statement() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN INSERT INTO insert_statements (rows) SELECT count(*) FROM inserted; RETURN NULL; END $$;
    CREATE TRIGGER record_insert_statement AFTER INSERT ON users REFERENCING NEW TABLE AS inserted
      FOR EACH STATEMENT EXECUTE FUNCTION record_insert_statement();`);
  const last = async () =>
    (await pool.query('SELECT coalesce(max(id), 0) AS id FROM insert_statements')).rows[0].id;
  return {
    /** Runs `write`; resolves with its result and the size of each statement it made, in order. @template T @param {() => Promise<T>} write */
    async around(write) {
      const before = await last();
      const result = await write();
      const { rows } = await pool.query(
        'SELECT rows FROM insert_statements WHERE id > $1 ORDER BY id',
        [before],
      );
      return { result, statements: rows.map((r) => r.rows) };
    },
  };
}

/** @param {number} rows @param {number} chunkRows */
const chunkSizes = (rows, chunkRows) =>
  Array.from({ length: Math.ceil(rows / chunkRows) }, (_, i) =>
    Math.min(chunkRows, rows - i * chunkRows),
  );

for (const { label, env } of WRITE_VARIANTS) {
  describe(`strings are stored byte for byte (${label})`, () => {
    const ctx = useAppAndDatabase({ ...env });
    /** @type {Awaited<ReturnType<typeof recordInsertStatements>>} */ let recorder;
    before(async () => {
      recorder = await recordInsertStatements(ctx.db.pool);
    });

    /** @param {{ email: string, name: string, passwordHash: string }[]} users */
    async function assertStoredAsSent(users) {
      const stored = await ctx.db.usersByEmail(users.map((u) => u.email));
      assert.equal(stored.size, users.length);
      for (const u of users) {
        const row = stored.get(u.email);
        assert.equal(
          Buffer.compare(Buffer.from(row.name), Buffer.from(u.name)),
          0,
          `name ${JSON.stringify(u.name)}`,
        );
        assert.equal(row.password_hash, u.passwordHash);
      }
      const { rows } = await ctx.db.pool.query(
        "SELECT to_regclass('public.users') IS NOT NULL AS still_there",
      );
      assert.equal(rows[0].still_there, true);
    }

    test("a small request (group commit's path when it is on): SQL-looking, escaped and non-Latin names survive, in one statement", async () => {
      const users = trickyUsers(1);
      const { result: res, statements } = await recorder.around(() => ctx.app.postUsers(users));
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.inserted, users.length);
      assert.deepEqual(statements, [users.length]);
      await assertStoredAsSent(users);
    });

    for (const chunkRows of [1000, 3]) {
      test(`a batch over GROUP_COMMIT_SMALL_ROWS with INSERT_CHUNK_ROWS=${chunkRows}: the names survive, written in chunks of ${chunkRows}`, async (t) => {
        const app = await startTestApp({
          databaseUrl: ctx.db.url,
          env: { ...env, INSERT_CHUNK_ROWS: String(chunkRows) },
        });
        t.after(() => app.close());
        const users = trickyUsers(13);
        assert.ok(
          users.length > app.config.groupCommitSmallRows,
          `${users.length} users go past group commit to the chunked writer`,
        );
        const { result: res, statements } = await recorder.around(() => app.postUsers(users));
        assert.equal(res.status, 201, res.text);
        assert.equal(res.body.inserted, users.length);
        assert.deepEqual(statements, chunkSizes(users.length, chunkRows));
        await assertStoredAsSent(users);
      });
    }

    test('an email with a quote and a plus is stored lower-cased and intact', async () => {
      const email = `O'Neil+${uniqueTag()}@Example.COM`;
      const res = await ctx.app.postUsers([{ email, name: 'Q' }]);
      assert.equal(res.status, 201);
      assert.ok((await ctx.db.usersByEmail([email.toLowerCase()])).has(email.toLowerCase()));
    });
  });
}
