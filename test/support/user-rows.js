import { USER_FIELDS } from '../../service/src/user-columns.js';

/**
 * A row as the validator gives it: the fields named, null for every other column of the
 * declaration (service/src/user-columns.js), so a test's rows need no edit when a column is added.
 * @param {{ email: string, name: string } & Partial<import('../../service/src/user-columns.js').UserRow>} fields
 * @returns {import('../../service/src/user-columns.js').UserRow}
 */
export const userRow = (fields) =>
  /** @type {any} */ (Object.fromEntries(USER_FIELDS.map((f) => [f, fields[f] ?? null])));
