// The users table's statements' values (user-sql.js, row-sources.js, chunk-writers.js): how a write
// meets a stored key and what it answers.
import type { Answer, Statement } from '../db/statement.js';
import type { UserColumn, UserField, UserRow, WrittenUser } from '../user-columns.js';

export type { Answer, Statement, UserColumn, UserField, UserRow, WrittenUser };

/** What a write did, as its 'counts' answer or its command tag tells it. */
export type WriteCounts = {
  inserted: number;
  updated: number;
};

/** A key already stored: fail (23505), skip (DO NOTHING), merge (DO UPDATE where a value changes). */
export type OnConflict = 'fail' | 'skip' | 'merge';

/**
 * A write's answer: the command tag, a counts row, a row per key written, or each row for a
 * representation (RETURNED_AS_TEXT).
 */
export type Returning = 'none' | 'counts' | 'emails' | 'rows';
