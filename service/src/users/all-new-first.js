// All-new first, for every writer (a request, a group, a stream's chunks and merge): a plain INSERT
// or COPY, then only after its unique violation the write that resolves conflicts, which costs
// PostgreSQL far more; almost every write is new users.

import { classifyFailure } from '../db/failure.js';

/** Whether PostgreSQL refused a row for a stored (or repeated) key. @param {unknown} err */
export const isUniqueViolation = (err) => classifyFailure(err).uniqueViolation;

/**
 * `asNew`, then `resolving` after its unique violation (`undo` first), or at once unless `tryNew`.
 * @template T @param {() => Promise<T>} asNew @param {() => Promise<T>} resolving
 * @param {{ tryNew?: boolean, undo?: () => Promise<unknown> }} [options] @returns {Promise<T>}
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
