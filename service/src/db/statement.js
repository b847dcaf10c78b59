// A statement beside the function that reads its answer (its decoder): each table's module builds
// its statements as `{ text, values, decode }`, so what an answer holds is read where the text that
// asked for it is written, and nowhere else.

/**
 * A query's answer: one result, or one a statement when its text holds several.
 * @typedef {import('pg').QueryResult | import('pg').QueryResult[]} Answer
 */
/**
 * What pg sends (text, parameters, row mode; `operation` names its span) and how its answer is
 * read.
 * @template T
 * @typedef {import('pg').QueryConfig & { operation?: string, decode: (answer: Answer) => T }}
 *   Statement
 */
/** @typedef {{ query: (statement: import('pg').QueryConfig) => Promise<any> }} Queryable */

/**
 * Sends a statement and reads its answer.
 * @template T
 * @param {Queryable} client
 * @param {Statement<T>} statement
 * @returns {Promise<T>}
 */
export const runStatement = async (client, statement) =>
  statement.decode(await client.query(statement));
