import { insertedUser } from '../users/user-sql.js';
import { OUTCOME, READ_COLUMNS } from './write-query.js';

// return=representation's answer, as JSON text: the rows written, in the order sent.

/** @typedef {import('../users/user-writer.js').WrittenUser} WrittenUser */
/** @typedef {import('../users/user-schema.js').UserRow} UserRow */
/** @typedef {import('./write-query.js').ReadColumn} ReadColumn */

/**
 * The rows written, in the order their emails were first sent, each with the columns selected, as
 * the JSON text of the answer. Emails skipped as duplicates were not written and are not in it (as
 * in PostgREST).
 *
 * With `outcome` selected (sluice's per-item report), every item of the request instead, in order:
 * `outcome` is `inserted` or `updated` (with the row as written), `skipped` (already stored, or
 * unchanged in merge mode: nothing written, so its other columns are null but its email), or
 * `repeated` (its email came earlier in the request; that entry tells what was written).
 *
 * With every column selected in their order (no `select`, or `*`), the rows are serialised as they
 * are; and when every item was inserted, once each, they are the items themselves as stored: no
 * lookup by email.
 * @param {UserRow[]} sent  the request's rows in the order sent (emails lower-cased, repeats kept)
 * @param {WrittenUser[]} users  the rows written
 * @param {readonly ReadColumn[]} select
 * @returns {string}
 */
export function representation(sent, users, select) {
  const report = select.includes(OUTCOME);
  const asWritten = isEveryColumn(select);
  if (asWritten && !report && users.length === sent.length) {
    const createdAt = insertedAtOnce(users);
    if (createdAt !== undefined) {
      return JSON.stringify(sent.map((row) => insertedUser(row, createdAt)));
    }
  }
  /** @type {Map<string, WrittenUser | null>} null: its entry is out already */
  const byEmail = new Map();
  for (const u of users) byEmail.set(u.email, u);
  /** @type {Record<string, unknown>[]} */
  const out = [];
  for (const row of sent) {
    const email = row.email;
    const u = byEmail.get(email);
    if (!report) {
      if (!u) continue;
      byEmail.set(email, null); // an email sent twice is one row, shown where it was first sent
      out.push(asWritten ? u : pick(u, select));
      continue;
    }
    if (u === null) {
      out.push(pick({ email }, select, 'repeated'));
      continue;
    }
    byEmail.set(email, null);
    out.push(u ? pick(u, select, u.updatedAt === null ? 'inserted' : 'updated') : pick({ email }, select, 'skipped'));
  }
  return JSON.stringify(out);
}

/**
 * When every row written was inserted, by one transaction (one createdAt), that createdAt: each
 * row is then the item as sent. Undefined otherwise.
 * @param {WrittenUser[]} users
 */
function insertedAtOnce(users) {
  const createdAt = users[0]?.createdAt;
  for (const u of users) if (u.updatedAt !== null || u.createdAt !== createdAt) return undefined;
  return createdAt;
}

/** Whether `select` is every column of a representation, in order (no select, or `*`). @param {readonly ReadColumn[]} select */
const isEveryColumn = (select) => select.length === READ_COLUMNS.length && select.every((c, i) => c === READ_COLUMNS[i]);

/**
 * @param {Partial<WrittenUser>} u @param {readonly ReadColumn[]} select @param {string} [outcome]
 * @returns {Record<string, unknown>}
 */
function pick(u, select, outcome) {
  /** @type {Record<string, unknown>} */
  const row = {};
  for (const c of select) row[c] = c === OUTCOME ? outcome : (u[c] ?? null);
  return row;
}
