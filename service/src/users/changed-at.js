// changedAt, merge mode's ordering value: whether a value of the schema's shape names an instant
// PostgreSQL stores as sent, and the order of two values. Both run on every ordered item of the
// hot path, so they read the fixed positions of RFC 3339's shape by character code rather than
// slicing the text into numbers (which cost a third of a microsecond an item: npm run bench:hot-path).

const ZERO = 0x30;
const MAX_OFFSET_HOURS = 15;

/** The number written by the digits of `s` from `at` to `at + length`. @param {string} s @param {number} at @param {number} length */
function digits(s, at, length) {
  let n = 0;
  for (let i = at; i < at + length; i++) n = n * 10 + s.charCodeAt(i) - ZERO;
  return n;
}

/** @param {number} year @param {number} month  1-12 */
function daysInMonth(year, month) {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

/**
 * Whether a date-time of the schema's shape (user-schema.js CHANGED_AT: digits where RFC 3339 has
 * them) names one that exists, in an offset PostgreSQL takes: it would refuse a 30 February, an
 * hour 24 or an offset of +16:00 (a 500), and roll a second 60 over into the next minute (not as sent).
 * @param {string} s
 */
export function isRealDateTime(s) {
  const year = digits(s, 0, 4);
  const month = digits(s, 5, 2);
  const day = digits(s, 8, 2);
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return false;
  if (digits(s, 11, 2) > 23 || digits(s, 14, 2) > 59 || digits(s, 17, 2) > 59) return false;
  const last = s.length - 1;
  if (s.charCodeAt(last) === 0x5a) return true; // Z
  // RFC 3339 allows offsets to ±23:59, PostgreSQL only to ±15:59 (a 22008 error past it).
  return digits(s, last - 4, 2) <= MAX_OFFSET_HOURS && digits(s, last - 1, 2) <= 59;
}

/**
 * Orders two changedAt values by the instants they name, to the microsecond (which a Date does
 * not keep; milliseconds and microseconds apart, as microseconds since the epoch pass 2^53 in
 * 2255). Only for values that passed the schema and isRealDateTime; null (none) before any value.
 * @param {string | null} a @param {string | null} b
 * @returns {number}  negative when a is older, 0 when the same instant, positive when newer
 */
export function compareChanges(a, b) {
  if (a === null || b === null) return a === b ? 0 : a === null ? -1 : 1;
  const aMs = epochMs(a);
  const bMs = epochMs(b);
  return aMs !== bMs ? aMs - bMs : micros(a) - micros(b);
}

/** @param {string} s */
const offsetAt = (s) => (s.charCodeAt(s.length - 1) === 0x5a ? s.length - 1 : s.length - 6);
/** Milliseconds since the epoch, to the whole second plus the offset. @param {string} s */
const epochMs = (s) => Date.parse(`${s.slice(0, 19)}${s.slice(offsetAt(s))}`);
/** The microseconds of the second (the fraction, up to six digits). @param {string} s */
function micros(s) {
  if (s.charCodeAt(19) !== 0x2e) return 0;
  const end = offsetAt(s);
  return digits(s, 20, end - 20) * 10 ** (6 - (end - 20));
}
