// A statement beside the function that reads its answer (its decoder): `{ text, values, decode }`,
// so an answer is read where the text that asked for it is written, and nowhere else.

/** @import { Answer, Queryable } from './db-types.js' */
/** @template T @typedef {import('./db-types.js').Statement<T>} Statement */

/** @template T @param {Queryable} client @param {Statement<T>} statement @returns {Promise<T>} */
export const runStatement = async (client, statement) =>
  statement.decode(await client.query(statement));
