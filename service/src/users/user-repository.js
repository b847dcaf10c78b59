import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import format from 'pg-format';
import copyStreams from 'pg-copy-streams';
import { createReplayGuess } from './replay-guess.js';

/** @typedef {import('./user-schema.js').UserRow} UserRow */
/** @typedef {import('pg').PoolClient} PoolClient */
/**
 * Writes one chunk. `skipStored` false: every email must be new, and a stored one fails the whole
 * statement with a unique violation; true: stored emails are skipped. Resolves to the rows inserted.
 * @typedef {(client: PoolClient, rows: UserRow[], skipStored: boolean) => Promise<number>} InsertChunk
 */

const COLUMNS = 'email, name, phone, password_hash';
// Every strategy can skip an email already stored; its command tag then counts only the new rows.
const ON_CONFLICT = 'ON CONFLICT (email) DO NOTHING';
const UNIQUE_VIOLATION = '23505';

// pg-format's quoteLiteral walks every string character by character; under the batch load test
// it and the garbage it made were a third of the service's CPU. A value without a quote or a
// backslash needs no escaping, and for it pg-format returns exactly the value in single quotes;
// every other value still goes through pg-format (a test checks both give the same SQL).
const NEEDS_ESCAPING = /['\\]/;
/** @param {string | null} v */
const literal = (v) => (v === null ? 'NULL' : NEEDS_ESCAPING.test(v) ? format.literal(v) : `'${v}'`);

/**
 * The whole statement for one chunk: a multi-row VALUES list quoted by pg-format.
 * @param {UserRow[]} rows
 * @param {{ skipStored?: boolean, returning?: boolean }} [options]
 *   skipStored: ON CONFLICT DO NOTHING (default true); returning: RETURNING the emails inserted
 */
export function buildInsertSql(rows, { skipStored = true, returning = false } = {}) {
  const values = rows.map((r) => `(${literal(r[0])}, ${literal(r[1])}, ${literal(r[2])}, ${literal(r[3])})`).join(', ');
  return format(`INSERT INTO users (${COLUMNS}) VALUES %s${skipStored ? ` ${ON_CONFLICT}` : ''}${returning ? ' RETURNING email' : ''}`, values);
}

/** @type {InsertChunk} */
async function insertWithFormat(client, rows, skipStored) {
  const result = await client.query(buildInsertSql(rows, { skipStored }));
  return result.rowCount ?? 0;
}

const UNNEST_SQL = `INSERT INTO users (${COLUMNS}) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])`;

/** Four array parameters instead of a literal per value: no quoting, one parse. @type {InsertChunk} */
async function insertWithUnnest(client, rows, skipStored) {
  const columns = /** @type {[string[], string[], (string | null)[], (string | null)[]]} */ ([[], [], [], []]);
  for (const row of rows) {
    columns[0].push(row[0]);
    columns[1].push(row[1]);
    columns[2].push(row[2]);
    columns[3].push(row[3]);
  }
  const result = await client.query(skipStored ? `${UNNEST_SQL} ${ON_CONFLICT}` : UNNEST_SQL, columns);
  return result.rowCount ?? 0;
}

/** A CSV field: quoted (so an empty string stays one), NULL as nothing at all. @param {string | null} v */
const csvField = (v) => (v === null ? '' : `"${v.replaceAll('"', '""')}"`);
const COPY_SQL = `COPY users (${COLUMNS}) FROM STDIN (FORMAT csv)`;

/**
 * COPY straight into users: the cheapest way in, but it cannot skip a stored email. A chunk that
 * may hold some is written with pg-format's INSERT ... ON CONFLICT instead.
 * @type {InsertChunk}
 */
async function insertWithCopy(client, rows, skipStored) {
  if (skipStored) return insertWithFormat(client, rows, true);
  const csv = rows.map((r) => `${csvField(r[0])},${csvField(r[1])},${csvField(r[2])},${csvField(r[3])}\n`).join('');
  const copy = client.query(copyStreams.from(COPY_SQL));
  await pipeline(Readable.from([csv]), copy);
  return copy.rowCount ?? rows.length;
}

/** How a chunk is written, by INSERT_STRATEGY. */
export const STRATEGIES = /** @type {const} */ ({ format: insertWithFormat, unnest: insertWithUnnest, copy: insertWithCopy });

/** @param {unknown} err */
export const isUniqueViolation = (err) => /** @type {{ code?: string }} */ (err)?.code === UNIQUE_VIOLATION;

/**
 * Writes validated rows all or nothing: one statement per chunk of `chunkRows`; several chunks
 * run in one transaction, a single chunk needs none (one statement is atomic).
 *
 * Skipping stored emails (ON CONFLICT) costs PostgreSQL about a quarter of its insert rate, and
 * almost every batch is new users. So a batch first goes in as all-new; a unique violation rolls
 * that attempt back whole and the batch is written again skipping stored emails. After a replay
 * the next batches skip stored emails at once for a while (replays come in runs: a retried
 * message, a re-sent file), so a replay-heavy load never pays twice.
 *
 * @param {import('../db.js').Database} db
 * @param {{ chunkRows: number, strategy: keyof typeof STRATEGIES }} options
 */
export function createUserWriter(db, { chunkRows, strategy }) {
  const insertChunk = STRATEGIES[strategy];
  const replays = createReplayGuess();

  /** @param {UserRow[]} rows @param {boolean} skipStored @returns {Promise<number>} */
  function write(rows, skipStored) {
    if (rows.length <= chunkRows) return db.withClient((client) => insertChunk(client, rows, skipStored));
    return db.transaction(async (client) => {
      let inserted = 0;
      for (let start = 0; start < rows.length; start += chunkRows) {
        inserted += await insertChunk(client, rows.slice(start, start + chunkRows), skipStored);
      }
      return inserted;
    });
  }

  /**
   * All-new first; skipping stored emails after a unique violation, or at once while replays are
   * likely. Every way in (a request alone, a group) goes through here.
   * @template T
   * @param {number} rowCount
   * @param {() => Promise<T>} asNew  fails with a unique violation when an email is stored
   * @param {() => Promise<T>} skipping
   * @param {(result: T) => number} insertedOf
   * @returns {Promise<T>}
   */
  async function allNewFirst(rowCount, asNew, skipping, insertedOf) {
    if (!replays.likely()) {
      try {
        return await asNew();
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
      }
    }
    const result = await skipping();
    if (insertedOf(result) < rowCount) replays.seen();
    return result;
  }

  return {
    /**
     * @param {UserRow[]} rows  validated, sorted by email, no email twice
     * @returns {Promise<number>} rows actually inserted
     */
    insertUsers: (rows) => allNewFirst(rows.length, () => write(rows, false), () => write(rows, true), (n) => n),

    /**
     * One pg-format statement whatever the strategy, telling which emails it inserted (group commit
     * credits each to its request).
     * @param {UserRow[]} rows  sorted by email, no email twice, at most one statement's worth
     * @returns {Promise<'all' | Set<string>>}
     */
    insertReturningEmails: (rows) =>
      allNewFirst(
        rows.length,
        () => db.withClient((client) => client.query(buildInsertSql(rows, { skipStored: false }))).then(() => /** @type {const} */ ('all')),
        () => db.withClient((client) => client.query(buildInsertSql(rows, { returning: true }))).then((r) => new Set(r.rows.map((row) => row.email))),
        (r) => (r === 'all' ? rows.length : r.size),
      ),
  };
}

/** @typedef {ReturnType<typeof createUserWriter>} UserWriter */
