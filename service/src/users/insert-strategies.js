// INSERT_STRATEGY's names, a leaf so config.js reads them without the writer (chunk-writers.js).
import { frozenWords } from '@sluice/env';

export const INSERT_STRATEGIES = frozenWords(['format', 'unnest', 'copy']);
/** @typedef {(typeof INSERT_STRATEGIES)[number]} InsertStrategy */
