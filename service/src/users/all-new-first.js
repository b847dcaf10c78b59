// All-new first, the one way every writer tries a write (the batch writer, a group, a streamed
// import's chunks and its merge): a plain INSERT or COPY, which a stored or repeated email fails
// with a unique violation; then, and only then, the write that resolves conflicts. Resolving costs
// PostgreSQL far more than inserting, and almost every write is new users.

const UNIQUE_VIOLATION = '23505';

/** Whether PostgreSQL refused a row for a stored (or repeated) key. @param {unknown} err */
export const isUniqueViolation = (err) => /** @type {{ code?: string }} */ (err)?.code === UNIQUE_VIOLATION;

/**
 * `asNew`, and `resolving` after its unique violation (`undo` first: a rollback to a savepoint),
 * or at once when `tryNew` is false; any other failure is thrown as it came.
 * @template T
 * @param {() => Promise<T>} asNew @param {() => Promise<T>} resolving
 * @param {{ tryNew?: boolean, undo?: () => Promise<unknown> }} [options]
 * @returns {Promise<T>}
 */
export async function allNewFirst(asNew, resolving, { tryNew = true, undo } = {}) {
  if (tryNew) {
    try {
      return await asNew();
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      await undo?.();
    }
  }
  return resolving();
}
