import { OUTCOME, READ_COLUMNS } from './write-query.js';

// return=representation's answer, as JSON text: the rows written, in the order sent.

/** @typedef {import('../users/write-types.js').WrittenUser} WrittenUser */
/** @typedef {import('./write-query.js').ReadColumn} ReadColumn */

/**
 * The rows written, in the order their emails were first sent, with the columns selected (skipped
 * emails left out, as PostgREST). With `outcome`: every item, `inserted`, `updated`, `skipped`
 * (nothing written) or `repeated` (an earlier item has its email).
 * @param {readonly string[]} emails the emails in the order sent, repeats kept
 * @param {readonly WrittenUser[]} users
 * @param {readonly ReadColumn[]} select
 * @returns {string}
 */
export function representation(emails, users, select) {
  const report = select.includes(OUTCOME);
  const asWritten = isEveryColumn(select);
  /** @type {Map<string, WrittenUser | null>} */
  const byEmail = new Map(); // null: its entry is out already
  for (const u of users) byEmail.set(u.email, u);
  /** @type {unknown[]} */
  const out = [];
  for (const email of emails) {
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
    out.push(
      u
        ? pick(u, select, u.updatedAt === null ? 'inserted' : 'updated')
        : pick({ email }, select, 'skipped'),
    );
  }
  return JSON.stringify(out);
}

/**
 * Whether `select` is every column of a representation, in order (no select, or `*`).
 * @param {readonly ReadColumn[]} select
 */
const isEveryColumn = (select) =>
  select.length === READ_COLUMNS.length && select.every((c, i) => c === READ_COLUMNS[i]);

/**
 * @param {Partial<WrittenUser>} u
 * @param {readonly ReadColumn[]} select
 * @param {string} [outcome]
 * @returns {Record<string, unknown>}
 */
export function pick(u, select, outcome) {
  /** @type {Record<string, unknown>} */
  const row = {};
  for (const c of select) row[c] = c === OUTCOME ? outcome : (u[c] ?? null);
  return row;
}
