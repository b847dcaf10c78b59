// The names INSERT_STRATEGY takes, a leaf so that config.js reads them without the writer.
// chunk-writers.js holds a writer for each (checked by tsc where user-writer.js picks one).

export const INSERT_STRATEGIES = /** @type {const} */ (['format', 'unnest', 'copy']);
/** @typedef {(typeof INSERT_STRATEGIES)[number]} InsertStrategy */
