// INSERT_STRATEGY's names, a leaf so config.js reads them without the writer (chunk-writers.js).

export const INSERT_STRATEGIES = /** @type {const} */ (['format', 'unnest', 'copy']);
/** @typedef {(typeof INSERT_STRATEGIES)[number]} InsertStrategy */
