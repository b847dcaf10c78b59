/**
 * The `code` an error carries when it is a string: PostgreSQL's SQLSTATE, Node's errno name.
 * @param {unknown} err
 * @returns {string | undefined}
 */
export function errorCode(err) {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  return typeof err.code === 'string' ? err.code : undefined;
}
