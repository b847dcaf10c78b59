// changedAt, merge mode's ordering value: whether a value of the schema's shape names an instant
// PostgreSQL stores as sent, and the order of two. On the hot path: they read RFC 3339's fixed
// positions by character code, not by slicing the text into numbers.

const ZERO = 0x30;
const MAX_OFFSET_HOURS = 15;

/** @param {string} s @param {number} at @param {number} length */
function digits(s, at, length) {
  let n = 0;
  for (let i = at; i < at + length; i++) n = n * 10 + s.charCodeAt(i) - ZERO;
  return n;
}

function daysInMonth(/** @type {number} */ year, /** @type {number} */ month) {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
}

// Whether a date-time of the schema's shape exists, in an offset PostgreSQL takes: it refuses a 30
// February, an hour 24 or +16:00, and rolls a second 60 over.
/** @param {string} s */
export function isRealDateTime(s) {
  const year = digits(s, 0, 4);
  const month = digits(s, 5, 2);
  const day = digits(s, 8, 2);
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month))
    return false;
  if (digits(s, 11, 2) > 23 || digits(s, 14, 2) > 59 || digits(s, 17, 2) > 59) return false;
  const last = s.length - 1;
  if (s.charCodeAt(last) === 0x5a) return true; // Z
  return digits(s, last - 4, 2) <= MAX_OFFSET_HOURS && digits(s, last - 1, 2) <= 59;
}

// Orders two valid changedAt values by instant, to the microsecond (a Date keeps none); null before
// any value.
/** @param {string | null} a @param {string | null} b @returns {number}  negative: a is older */
export function compareChanges(a, b) {
  if (a === null || b === null) return a === b ? 0 : a === null ? -1 : 1;
  const aMs = epochMs(a);
  const bMs = epochMs(b);
  return aMs !== bMs ? aMs - bMs : micros(a) - micros(b);
}

const offsetAt = (/** @type {string} */ s) =>
  s.charCodeAt(s.length - 1) === 0x5a ? s.length - 1 : s.length - 6;
const epochMs = (/** @type {string} */ s) => Date.parse(`${s.slice(0, 19)}${s.slice(offsetAt(s))}`);
/** The second's fraction, in microseconds. @param {string} s */
function micros(s) {
  if (s.charCodeAt(19) !== 0x2e) return 0;
  const end = offsetAt(s);
  return digits(s, 20, end - 20) * 10 ** (6 - (end - 20));
}
