import { parsePreferences } from './prefer.js';
import { parseWriteQuery } from './write-query.js';

// Read before the body is, so a refused write costs nothing; left in res.locals.write.

/**
 * @typedef {import('./prefer.js').Preferences
 *   & { query: import('./write-query.js').WriteQuery }} WriteOptions
 */

/** @returns {import('express').RequestHandler} */
export function readWriteOptions() {
  return (req, res, next) => {
    const header = req.headers.prefer;
    const preferences = parsePreferences(Array.isArray(header) ? header.join(', ') : header);
    const mark = req.url.indexOf('?');
    res.locals.write = {
      ...preferences,
      query: mark === -1 ? parseWriteQuery('') : parseWriteQuery(req.url.slice(mark + 1)),
    };
    next();
  };
}
