import { lastResult } from '../db/transaction-settings.js';
import { KEY_COLUMN as KEY } from '../user-columns.js';
import { COLUMNS } from './user-sql.js';

// The erasures table's statements (migration 0010): the assertion every write carries, the lookup
// of the rows it may not write, and the erasure's own steps, each beside its decoder.

/** @import { Statement } from './sql-types.js' */

/** The SQLSTATE of sluice_erased_email_written(): a write named an erased email. */
export const ERASED_EMAIL_WRITTEN = 'SL001';
const FAIL = 'sluice_erased_email_written()';

/** Fails when a tombstone exists that a process has not read (`generation`: the last it read). */
export const newerTombstone = (/** @type {number} */ generation) =>
  `SELECT FROM erasures WHERE generation > ${Math.trunc(generation)} AND ${FAIL}`;

/**
 * The tombstones after `generation`: the last generation among them (`generation` when none), and
 * their tags. @param {number} generation
 * @returns {Statement<{ generation: number, tags: number[] }>}
 */
export const tombstonesSince = (generation) => ({
  text: `SELECT email_tag, generation::float8 AS generation FROM erasures
    WHERE generation > ${Math.trunc(generation)}`,
  decode: (answer) => {
    const rows = lastResult(answer).rows;
    let last = generation;
    for (const row of rows) if (row.generation > last) last = row.generation;
    return { generation: last, tags: rows.map((row) => row.email_tag) };
  },
});

/**
 * A staged import's rows an erasure keeps out, deleted from users once written (no stored row is
 * ever older than its email's erasure, so only those the import wrote are); how many.
 * @type {Statement<number>}
 */
export const LEAVE_OUT_STAGED = {
  text: `WITH left_out AS (
    DELETE FROM users u USING users_stream s JOIN erasures e ON e.email_hmac = s.email_hmac
    WHERE u.email = s.email AND (u.changed_at IS NULL OR u.changed_at <= e.erased_at)
    RETURNING u.email)
  SELECT count(*)::int AS n FROM left_out`,
  decode: (answer) => lastResult(answer).rows[0].n,
};

/** A bytea[] constant. @param {readonly Buffer[]} hmacs */
export const hmacArray = (hmacs) =>
  `'{${hmacs.map((h) => `\\\\x${h.toString('hex')}`).join(',')}}'::bytea[]`;

/** A timestamptz[] constant of valid changedAt values (no quote in one); '{}' for none. */
export const changedArray = (/** @type {readonly (string | null)[]} */ changes) =>
  changes.some((c) => c !== null)
    ? `'{${changes.map((c) => (c === null ? 'NULL' : `"${c}"`)).join(',')}}'::timestamptz[]`
    : `'{}'::timestamptz[]`;

/** Each email's hash beside its change (unnest pads a shorter array with NULLs). */
const SENT = (/** @type {string} */ hmacs, /** @type {string} */ changes) =>
  `unnest(${hmacs}, ${changes}) WITH ORDINALITY AS s (h, c, i)
  JOIN erasures e ON e.email_hmac = s.h WHERE (s.c IS NULL OR s.c <= e.erased_at)`;

/**
 * Fails when one of these emails was erased and its change is not newer.
 * @param {string} hmacs hmacArray's @param {string} changes changedArray's
 */
export const staleTombstone = (hmacs, changes) => `SELECT FROM ${SENT(hmacs, changes)} AND ${FAIL}`;

/** A write's rows once its assertion holds. @param {string} source @param {string} guard */
export const guarded = (source, guard) =>
  `SELECT * FROM (${source}) AS g (${COLUMNS}) WHERE NOT EXISTS (${guard})`;

/**
 * The positions (from 0) of the rows a tombstone keeps out.
 * @param {readonly Buffer[]} hmacs @param {readonly (string | null)[]} changes
 * @returns {Statement<number[]>}
 */
export const staleRows = (hmacs, changes) => ({
  text: `SELECT (s.i - 1)::int AS at FROM ${SENT(hmacArray(hmacs), changedArray(changes))}`,
  decode: (answer) => lastResult(answer).rows.map((row) => row.at),
});

// An erasure: writers held off (they take ROW EXCLUSIVE, which this lock conflicts with) so that
// none of them wrote an email from before its tombstone; then every copy deleted.
export const HOLD_WRITERS = 'LOCK TABLE users IN SHARE ROW EXCLUSIVE MODE';

/**
 * The tombstones, each at its erasure's time (now without one), a later one kept; all of this
 * erasure's under the next generation (taken under HOLD_WRITERS: generations commit in order).
 * @param {{ hmacs: Buffer[], tags: number[], changes: (string | null)[] }} t
 */
export const recordTombstones = ({ hmacs, tags, changes }) =>
  `INSERT INTO erasures (email_hmac, email_tag, erased_at, generation)
  SELECT h, t, max(COALESCE(c, now())), (SELECT nextval('erasures_generation'))
  FROM unnest(${hmacArray(hmacs)}, '{${tags.join(',')}}'::integer[], ${changedArray(changes)})
    AS s (h, t, c) GROUP BY h, t
  ON CONFLICT (email_hmac) DO UPDATE
    SET erased_at = GREATEST(erasures.erased_at, EXCLUDED.erased_at),
      generation = EXCLUDED.generation`;

/** The rows of the emails (`$1`), deleted, giving `columns`. @param {readonly string[]} columns */
export const deleteUsers = (columns) => ({
  text: `DELETE FROM users WHERE ${KEY.column} = ANY($1::text[] COLLATE "C")
    RETURNING ${columns.join(', ')}`,
});

/** Items set aside that name one of the emails (as sent, in any case). */
export const DELETE_QUARANTINED = `DELETE FROM quarantined_items q
  WHERE EXISTS (SELECT FROM unnest($1::text[]) AS e (email)
    WHERE strpos(lower(q.item), e.email) > 0)`;

/** Stored outcomes whose representation names one of the emails. */
export const KEYS_NAMING = `SELECT client, key, outcome FROM idempotency_keys
  WHERE outcome IS NOT NULL AND (outcome::jsonb #> '{rendering,emails}') ?| $1::text[]
  FOR UPDATE`;

/** Answers stored whole before outcomes were, naming one of the emails: deleted, not rewritten. */
export const DELETE_OLD_ANSWERS = `DELETE FROM idempotency_keys k
  WHERE k.body IS NOT NULL
    AND EXISTS (SELECT FROM unnest($1::text[]) AS e (email)
      WHERE strpos(lower(k.body), e.email) > 0)`;

/** Each key's outcome, rewritten. */
export const REWRITE_OUTCOMES = `UPDATE idempotency_keys AS k SET outcome = v.o::json
  FROM unnest($1::text[], $2::text[], $3::text[]) AS v (c, k, o)
  WHERE k.client = v.c AND k.key = v.k`;
