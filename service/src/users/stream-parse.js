import { ApiError } from '../errors.js';
import { findDuplicateKeys } from '../json-keys.js';
import { REQUIRED_FIELDS, USER_FIELDS, isOneOf } from '../user-columns.js';

// The records of a streamed body (NDJSON, CSV), parsed as the text arrives; only the unfinished one
// is kept. Lines are counted as editors count them, so an error names the line a person goes to.

/** Longest NDJSON line or CSV record (with its line break) in UTF-16 units: no user is longer. */
export const MAX_RECORD_CHARS = 64 * 1024;

/** The columns a CSV header may name: the user's fields (user-columns.js), those required first. */
const CSV_COLUMNS = USER_FIELDS;
const THE_COLUMNS =
  `the columns ` + `are ${CSV_COLUMNS.join(', ')} (${REQUIRED_FIELDS.join(' and ')} required)`;
const HEADER_SHAPE = [
  REQUIRED_FIELDS.join(','),
  ...CSV_COLUMNS.filter((f) => !isOneOf(REQUIRED_FIELDS, f)).map((f) => `[,${f}]`),
].join('');
const COMMA = 44;
const QUOTE = 34;
const LF = 10;
const CR = 13;

/** @import { OnRecord, ParserOptions, RecordParser } from './stream-types.js' */

const tooLong = () => `is longer than ${MAX_RECORD_CHARS} characters, which no user is`;

/**
 * NDJSON / JSON Lines: a JSON value a line (JSON.parse), LF or CRLF, blank lines skipped.
 * @param {ParserOptions} [options] @returns {RecordParser}
 */
export function createNdjsonParser({ onUnreadable } = {}) {
  let rest = '';
  let line = 0;
  let first = true;

  /** @param {string} text @param {OnRecord} onRecord */
  function parseLine(text, onRecord) {
    line++;
    if (first) {
      first = false;
      // a byte-order mark is no part of the JSON
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (text.length > MAX_RECORD_CHARS)
      throw new ApiError('malformed_json', `line ${line} ${tooLong()}; nothing was written`);
    if (text.charCodeAt(text.length - 1) === CR) text = text.slice(0, -1);
    if (text.trim() === '') return;
    let value;
    try {
      value = JSON.parse(text);
    } catch {
      if (onUnreadable) return onUnreadable(line, text, 'is not valid JSON');
      throw new ApiError('malformed_json', `line ${line} is not valid JSON; nothing was written`);
    }
    const duplicates =
      value !== null && typeof value === 'object' ? findDuplicateKeys(text, value) : [];
    onRecord(
      value,
      line,
      duplicates.map((d) => d.key),
      text,
    );
  }

  return {
    feed(text, onRecord) {
      let start = 0;
      let lf = text.indexOf('\n');
      if (lf !== -1 && rest !== '') {
        parseLine(rest + text.slice(0, lf), onRecord);
        rest = '';
        start = lf + 1;
        lf = text.indexOf('\n', start);
      }
      while (lf !== -1) {
        parseLine(text.slice(start, lf), onRecord);
        start = lf + 1;
        lf = text.indexOf('\n', start);
      }
      rest += text.slice(start);
      if (rest.length > MAX_RECORD_CHARS)
        throw new ApiError('malformed_json', `line ${line + 1} ${tooLong()}; nothing was written`);
    },
    end(onRecord) {
      if (rest !== '') parseLine(rest, onRecord);
      rest = '';
    },
  };
}

/**
 * CSV (RFC 4180): a header naming the user's fields, then a user a record; an unquoted empty field
 * is not sent, `""` is an empty string (as COPY reads CSV); an empty line is skipped.
 * @param {ParserOptions} [options] @returns {RecordParser}
 */
export function createCsvParser({ onUnreadable } = {}) {
  let rest = '';
  let line = 1; // the line the next record starts on
  /** @type {string[] | undefined} */
  let columns = undefined;

  /** @param {string} message @param {number} [at] */
  const malformed = (message, at = line) => malformedCsv(message, at);

  /** @param {boolean} final @param {OnRecord} onRecord */
  function consume(final, onRecord) {
    let pos = 0;
    while (pos < rest.length) {
      const record = parseRecord(rest, pos, final, line);
      if (!record) break;
      const at = line;
      const start = pos;
      if (record.next - pos > MAX_RECORD_CHARS) throw malformed(tooLongRecord(rest, pos), at);
      pos = record.next;
      line += record.lines;
      const { fields } = record;
      if (fields.length === 1 && fields[0] === undefined) continue; // an empty line
      if (columns === undefined) {
        columns = headerColumns(fields, at);
        continue;
      }
      if (fields.length !== columns.length) {
        const problem = fieldCountProblem(fields.length, columns.length);
        if (onUnreadable) {
          onUnreadable(at, recordText(rest, start, pos), problem);
          continue;
        }
        throw malformed(problem, at);
      }
      // Its text only where it may be kept (set aside when invalid).
      onRecord(userOf(columns, fields), at, [], onUnreadable ? recordText(rest, start, pos) : '');
    }
    rest = rest.slice(pos);
    if (rest.length > MAX_RECORD_CHARS) throw malformed(tooLongRecord(rest, 0));
  }

  return {
    get columns() {
      return columns;
    },
    feed(text, onRecord) {
      rest += text;
      consume(false, onRecord);
    },
    end(onRecord) {
      consume(true, onRecord);
      // An empty body is an empty batch (the importer says so); one of blank lines has no header.
      if (columns === undefined && line > 1)
        throw malformed(`the body has no header row (${HEADER_SHAPE})`, 1);
    },
  };
}

/**
 * The CSV record at `pos`, or undefined when the text ends first and more may come.
 * @param {string} s @param {number} pos @param {boolean} final @param {number} line
 * @returns {{ fields: (string | undefined)[], next: number, lines: number } | undefined}
 */
function parseRecord(s, pos, final, line) {
  /** @type {(string | undefined)[]} */
  const fields = [];
  let lines = 0;
  let i = pos;
  for (;;) {
    if (s.charCodeAt(i) === QUOTE) {
      let value = '';
      let from = i + 1;
      for (;;) {
        const q = s.indexOf('"', from);
        if (q === -1) {
          if (final)
            throw malformedCsv('a quoted field is not closed before the end of the body', line);
          return undefined;
        }
        value += s.slice(from, q);
        if (q + 1 >= s.length && !final) return undefined; // `""` may be split between two pieces
        if (s.charCodeAt(q + 1) === QUOTE) {
          value += '"';
          from = q + 2;
          continue;
        }
        i = q + 1;
        break;
      }
      for (let at = value.indexOf('\n'); at !== -1; at = value.indexOf('\n', at + 1)) lines++;
      fields.push(value);
    } else {
      const start = i;
      i = unquotedFieldEnd(s, start, line + lines);
      if (i >= s.length && !final) return undefined;
      const end = i > start && s.charCodeAt(i - 1) === CR ? i - 1 : i;
      fields.push(end > start ? s.slice(start, end) : undefined);
    }
    const c = s.charCodeAt(i);
    if (c === COMMA) {
      i++;
      continue;
    }
    if (c === LF) return { fields, next: i + 1, lines: lines + 1 };
    if (c === CR && s.charCodeAt(i + 1) === LF) return { fields, next: i + 2, lines: lines + 1 };
    if (i >= s.length || (c === CR && i + 1 >= s.length)) {
      if (!final) return undefined;
      return { fields, next: s.length, lines };
    }
    throw malformedCsv(
      'a quoted field must be followed by a comma or the end of the line',
      line + lines,
    );
  }
}

/**
 * Where an unquoted field starting at `start` ends: at a comma, a line feed or the end of the text.
 * @param {string} s @param {number} start @param {number} line  the line it is on
 */
function unquotedFieldEnd(s, start, line) {
  let i = start;
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === COMMA || c === LF) break;
    if (c === QUOTE)
      throw malformedCsv(
        'a double quote inside a field that does not start ' +
          'with one (quote the field and double the quote)',
        line,
      );
  }
  return i;
}

/**
 * A CSV record as the user it sends: each column's field, those not sent left out.
 * @param {readonly string[]} columns @param {(string | undefined)[]} fields
 */
function userOf(columns, fields) {
  /** @type {Record<string, string>} */
  const user = {};
  for (let c = 0; c < columns.length; c++) {
    const value = fields[c];
    if (value !== undefined) user[columns[c]] = value;
  }
  return user;
}

/** @param {number} count @param {number} expected */
const fieldCountProblem = (count, expected) =>
  `the record ` +
  `has ${count} field${count === 1 ? '' : 's'} where ` +
  `the header names ${expected}`;

/**
 * Why it is refused, from its first MAX_RECORD_CHARS characters: alike however the body is cut.
 * @param {string} s @param {number} pos  where the record starts
 */
function tooLongRecord(s, pos) {
  const end = pos + MAX_RECORD_CHARS;
  let quoted = false;
  let fieldStart = true;
  for (let i = pos; i < end; i++) {
    const c = s.charCodeAt(i);
    if (quoted) {
      if (c === QUOTE) {
        if (i + 1 < end && s.charCodeAt(i + 1) === QUOTE) i++;
        else quoted = false;
      }
    } else {
      quoted = fieldStart && c === QUOTE;
      fieldStart = c === COMMA || c === LF;
    }
  }
  return quoted
    ? `a quoted field is not closed within ${MAX_RECORD_CHARS} characters ` +
        `(a double quote opens it and none closes it)`
    : `the record ${tooLong()}`;
}

/** @param {(string | undefined)[]} fields @param {number} at its line */
function headerColumns(fields, at) {
  /** @param {string} message */
  const malformed = (message) => malformedCsv(message, at);
  const names = fields.map(
    (f, i) => (i === 0 && f?.charCodeAt(0) === 0xfeff ? f.slice(1) : f) ?? '',
  );
  for (const name of names) {
    if (!isOneOf(CSV_COLUMNS, name)) {
      throw malformed(`the header names a column ${JSON.stringify(name)}; ${THE_COLUMNS}`);
    }
  }
  const twice = names.find((n, i) => names.indexOf(n) !== i);
  if (twice !== undefined) throw malformed(`the header names the column ${twice} twice`);
  const missing = REQUIRED_FIELDS.filter((n) => !names.includes(n));
  if (missing.length > 0)
    throw malformed(
      `the header must name the column${missing.length > 1 ? 's' : ''} ${missing.join(' and ')}`,
    );
  return names;
}

/** Without its line break. @param {string} s @param {number} start @param {number} end */
function recordText(s, start, end) {
  let to = end;
  if (s.charCodeAt(to - 1) === LF) to--;
  if (s.charCodeAt(to - 1) === CR) to--;
  return s.slice(start, to);
}

/** @param {string} message @param {number} at  the line */
const malformedCsv = (message, at) =>
  new ApiError('malformed_csv', `line ${at}: ${message}; nothing was written`);
