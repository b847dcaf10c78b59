// A statement beside the function that reads its answer (its decoder): each table's module builds
// its statements as `{ text, values, decode }`, so what an answer holds is read where the text that
// asked for it is written, and nowhere else.

/**
 * @typedef {import('./db-types.js').Answer} Answer
 * @typedef {import('./db-types.js').Queryable} Queryable
 */
/** @template T @typedef {import('./db-types.js').Statement<T>} Statement */

/** @template T @param {Queryable} client @param {Statement<T>} statement @returns {Promise<T>} */
export const runStatement = async (client, statement) =>
  statement.decode(await client.query(statement));
