import { createHmac } from 'node:crypto';
import { runStatement } from '../db/statement.js';
import { ApiError } from '../errors.js';
import { ORDER_COLUMN, keyOf } from '../user-columns.js';
import { ANY_TOMBSTONE, ERASED_EMAIL_WRITTEN, changedArray, guarded } from './erasure-sql.js';
import { ANY_ERASURE, hmacArray, staleRows, staleTombstone } from './erasure-sql.js';
import { csvLine } from './user-sql.js';

// What keeps an erased email from coming back: every write asserts, in its own statement (which
// holds the lock an erasure waits for), that it brings back no erased email. Until a process has
// seen a tombstone it asserts that there is none at all, and hashes nothing; once it has, it sends
// each email's keyed hash. A write the assertion fails learns which rows to leave out
// (`staleOf`) and goes again without them.

/** @import { Database, Lending, UserRow } from './write-types.js' */

/** @param {unknown} err */
export const isErasedWrite = (err) =>
  err instanceof Error && /** @type {{ code?: string }} */ (err).code === ERASED_EMAIL_WRITTEN;

/** `key`: ERASURE_KEY's bytes, when set. @param {{ key?: Buffer }} [options] */
export function createErasureGuard({ key } = {}) {
  let tombstonesSeen = false;
  /** The email's keyed hash (HMAC-SHA-256 under ERASURE_KEY). @param {string} email */
  const hmacOf = key ? (email) => createHmac('sha256', key).update(email).digest() : undefined;
  /** @param {readonly UserRow[]} rows */
  const changesOf = (rows) => rows.map((row) => row[ORDER_COLUMN.field]);
  const keyed = () => {
    if (!hmacOf)
      throw new ApiError('erasure_key_missing', undefined, { cause: new Error('ERASURE_KEY') });
    return hmacOf;
  };
  const guard = {
    hmacOf,
    /** What a write of these rows asserts: a query that fails, or gives no row. */
    assertion(/** @type {readonly UserRow[]} */ rows) {
      if (!tombstonesSeen || !hmacOf) return ANY_TOMBSTONE;
      const hmacs = hmacArray(rows.map((r) => hmacOf(keyOf(r))));
      return staleTombstone(hmacs, changedArray(changesOf(rows)));
    },
    /**
     * After a failed assertion: the rows a tombstone keeps out.
     * @param {Lending} client @param {readonly UserRow[]} rows @returns {Promise<Set<UserRow>>}
     */
    async staleOf(client, rows) {
      tombstonesSeen = true;
      const hmac = keyed();
      const at = await runStatement(
        client,
        staleRows(
          rows.map((r) => hmac(keyOf(r))),
          changesOf(rows),
        ),
      );
      return new Set(at.map((i) => rows[i]));
    },
    /** @param {readonly string[]} emails */
    hmacsOf: (emails) => emails.map(keyed()),
    /**
     * A stream's CSV line with its email's hash after it, once this process has seen a tombstone
     * (and has the key); before that, none: the stream asserts at its end that none exists.
     * @returns {((row: UserRow) => string) | undefined}
     */
    hashedLine() {
      if (!tombstonesSeen || !hmacOf) return undefined;
      return (row) => `${csvLine(row).slice(0, -1)},\\x${hmacOf(keyOf(row)).toString('hex')}\n`;
    },
    /** Whether a tombstone exists, learnt once: a stream decides how it writes before it starts. */
    async lookForTombstones(/** @type {Database} */ db) {
      if (tombstonesSeen) return;
      tombstonesSeen = await db.withClient((client) => runStatement(client, ANY_ERASURE));
    },
    noteTombstones() {
      tombstonesSeen = true;
    },
    /** A write's source with its assertion. @param {string} source @param {readonly UserRow[]} rows */
    guard: (source, rows) => guarded(source, guard.assertion(rows)),
  };
  return guard;
}

/** @typedef {ReturnType<typeof createErasureGuard>} ErasureGuard */
