import { USER_FIELDS } from '../../service/src/user-columns.js';

/**
 * A row as the validator gives it: the fields named, null for every other column of the
 * declaration (service/src/user-columns.js), so a test's rows need no edit when a column is added.
 * @param {{ email: string, name: string } & Partial<import('../../service/src/user-columns.js').UserRow>} fields
 * @returns {import('../../service/src/user-columns.js').UserRow}
 */
export const userRow = (fields) =>
  /** @type {any} */ (Object.fromEntries(USER_FIELDS.map((f) => [f, fields[f] ?? null])));

/**
 * A request's part of a write, as the write unit takes it: its rows, each a user sent.
 * @param {import('../../service/src/users/user-schema.js').UserRow[]} rows
 * @returns {import('../../service/src/users/write-types.js').Part}
 */
export const part = (rows) => ({ rows, received: rows.length, withRows: false });
