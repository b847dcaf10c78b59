/**
 * Exponential backoff with full jitter, so invocations retrying at once spread out.
 * @param {number} attempt 0 for the first retry @param {{ baseMs: number, maxMs: number }} options
 * @param {() => number} [random]
 */
export function backoffMs(attempt, { baseMs, maxMs }, random = Math.random) {
  return random() * Math.min(maxMs, baseMs * 2 ** attempt);
}

/** Delta-seconds or an HTTP date, in ms. @param {string | null} header @param {number} [now] */
export function parseRetryAfter(header, now = Date.now()) {
  const value = header?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  // Every HTTP-date form begins with the day's name; Date.parse alone reads "1.5" as a date.
  if (!HTTP_DATE_START.test(value)) return undefined;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

const HTTP_DATE_START = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)/;

/** @param {number} ms */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
