// What a pg span says of a statement: its operation and its row count, never its text (pg-format
// inlines the users a statement writes). Apart from sdk.js so that it is tested without the SDK.

/**
 * The statement's operation: its first keyword, or the keyword after the SET LOCAL that
 * user-repository.js puts before a group's statement and the now() that user-sql.js puts before a
 * write that returns its rows. Nothing past it is read: a literal could
 * hold a user.
 * @param {string | undefined} text
 */
export function operationOf(text) {
  const m = /^\s*(?:SET LOCAL [a-z_]+ = \d+;\s*)?(?:SELECT now\(\);\s*)?([A-Za-z]+)\b/.exec(text ?? '');
  return m ? m[1].toUpperCase() : undefined;
}

/**
 * The rows a query affected or returned; of the last statement, when one query held several.
 * @param {unknown} result  pg's QueryResult, or an array of them
 */
export function rowCountOf(result) {
  const last = Array.isArray(result) ? result[result.length - 1] : result;
  const count = /** @type {{ rowCount?: unknown } | undefined} */ (last)?.rowCount;
  return typeof count === 'number' ? count : undefined;
}
