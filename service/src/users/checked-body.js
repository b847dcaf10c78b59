import { ApiError, InvalidBatchError } from '../errors.js';
import { keptCsv, keptJson, keptUnreadable } from './kept-item.js';
import { overBound } from './quarantine.js';
import { createCsvParser, createNdjsonParser } from './stream-parse.js';
import { MAX_REPORTED_ERRORS, checkUser } from './user-schema.js';
import { csvLine } from './user-sql.js';

// A stream's body as the CSV COPY takes, its users parsed and checked (the one schema) as they are
// read. Once one is invalid nothing more is sent, and reading goes on only to name the problems;
// given a quarantine, an invalid record is set aside instead, until one past its bound.

/** @import { ItemError, OnRecord, OnUnreadable, Quarantine } from './stream-types.js' */
/** @import { QuarantinedItem, StreamFormat } from './stream-types.js' */
/** @typedef {(row: import('./sql-types.js').UserRow) => string} LineOf */

const TWICE = 'is given more than once in this object; send each field once';

export class CheckedBody {
  #texts;
  #format;
  #quarantine;
  #parser;
  #received = 0;
  #invalid = 0;
  /** @type {ItemError[]} */
  #problems = [];
  #csv = '';
  #settingAside;
  #lineOf;

  /**
   * `lineOf`: a row's CSV line (its email's hash after it, when the import hashes them).
   * @param {AsyncIterable<string>} texts @param {StreamFormat} format
   * @param {Quarantine} [quarantine] @param {LineOf} [lineOf]
   */
  constructor(texts, format, quarantine, lineOf = csvLine) {
    this.#lineOf = lineOf;
    this.#texts = texts;
    this.#format = format;
    this.#quarantine = quarantine;
    this.#settingAside = quarantine !== undefined;
    /** @type {OnUnreadable} */
    const onUnreadable = (line, text, message) => this.#unreadable(line, text, message);
    const options = quarantine && { onUnreadable };
    this.#parser = format === 'csv' ? createCsvParser(options) : createNdjsonParser(options);
  }

  get received() {
    return this.#received;
  }

  /** Whether each line carries its email's hash. */
  get hashed() {
    return this.#lineOf !== csvLine;
  }

  /**
   * The CSV of each piece read; `onInvalid` told after each once a user is invalid.
   * @param {() => void} onInvalid @returns {AsyncGenerator<string>}
   */
  async *pieces(onInvalid) {
    /** @type {OnRecord} */
    const onRecord = (item, line, duplicates, text) => this.#record(item, line, duplicates, text);
    for await (const text of this.#texts) {
      this.#parser.feed(text, onRecord);
      if (this.#invalid > 0) {
        onInvalid();
        if (this.#problems.length >= MAX_REPORTED_ERRORS) throw this.#refusal(false);
        continue;
      }
      yield this.#taken();
    }
  }

  /** The body's end: the CSV of its last users, or the refusal of an invalid or empty body. */
  end() {
    this.#parser.end((item, line, duplicates, text) => this.#record(item, line, duplicates, text));
    if (this.#invalid > 0) throw this.#refusal();
    if (this.#received === 0)
      throw new ApiError('empty_batch', 'the body holds no users: send at least one');
    return this.#taken();
  }

  /**
   * @param {unknown} item @param {number} line @param {string[]} duplicates @param {string} text
   */
  #record(item, line, duplicates, text) {
    const index = this.#received++;
    if (duplicates.length > 0) {
      const found = duplicates.map((field) => ({ index, field, message: TWICE }));
      return this.#invalidItem({ item, index, line, text }, found);
    }
    const named = this.#settingAside || this.#problems.length < MAX_REPORTED_ERRORS;
    const checked = checkUser(item, index, named);
    if (!Array.isArray(checked)) {
      if (this.#invalid === 0) this.#csv += this.#lineOf(checked);
      return;
    }
    this.#invalidItem({ item, index, line, text }, /** @type {ItemError[]} */ (checked));
  }

  /**
   * @param {{ item: unknown, index: number, line: number, text: string }} record
   * @param {ItemError[]} found
   */
  #invalidItem({ item, index, line, text }, found) {
    if (!this.#settingAside) return this.#refuse(found, line);
    const kept =
      this.#format === 'csv'
        ? keptCsv(
            /** @type {Record<string, string>} */ (item),
            /** @type {readonly string[]} */ (this.#parser.columns),
            text,
          )
        : keptJson(item, text);
    this.#setAside({
      position: index,
      line,
      reason: 'invalid_user',
      errors: found.map((problem) => ({ ...problem, line })),
      ...kept,
    });
  }

  /** @param {number} line @param {string} text @param {string} message */
  #unreadable(line, text, message) {
    const index = this.#received++;
    const found = [{ index, field: null, message, line }];
    if (!this.#settingAside) return this.#refuse(found, line);
    this.#setAside({
      position: index,
      line,
      reason: this.#format === 'csv' ? 'malformed_csv' : 'malformed_json',
      errors: found,
      ...keptUnreadable(line, text),
    });
  }

  /** @param {QuarantinedItem} item */
  #setAside(item) {
    const q = /** @type {Quarantine} */ (this.#quarantine);
    if (this.#format === 'csv') q.csvHeader ??= this.#parser.columns?.join(',') ?? null;
    q.add(item);
    if (!q.isOver) return;
    this.#settingAside = false;
    this.#invalid = q.count;
    this.#csv = '';
    this.#problems.push(...q.errors);
  }

  /** @param {ItemError[]} found @param {number} line */
  #refuse(found, line) {
    this.#invalid++;
    this.#csv = '';
    for (const problem of found)
      if (this.#problems.length < MAX_REPORTED_ERRORS) this.#problems.push({ ...problem, line });
  }

  #refusal(complete = true) {
    const invalid = this.#invalid;
    const received = this.#received;
    const problems = this.#problems.slice(0, MAX_REPORTED_ERRORS);
    if (this.#quarantine)
      return overBound(invalid, received, this.#quarantine.maxInvalid, problems, complete);
    return new InvalidBatchError(
      `${complete ? '' : 'at least '}${invalid} of ${complete ? '' : 'the first '}` +
        `${received} users are invalid; nothing was written`,
      this.#problems,
    );
  }

  #taken() {
    const piece = this.#csv;
    this.#csv = '';
    return piece;
  }
}
