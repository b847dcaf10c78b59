/**
 * Exponential backoff with full jitter (a random wait between 0 and base × 2^attempt, capped), so
 * that many invocations retrying at once spread out instead of hitting the service in waves.
 * @param {number} attempt  0 for the first retry
 * @param {{ baseMs: number, maxMs: number }} options
 * @param {() => number} [random]
 */
export function backoffMs(attempt, { baseMs, maxMs }, random = Math.random) {
  return random() * Math.min(maxMs, baseMs * 2 ** attempt);
}

/**
 * Retry-After as milliseconds: delta-seconds or an HTTP date; undefined when absent or unreadable.
 * @param {string | null} header
 * @param {number} [now]
 */
export function parseRetryAfter(header, now = Date.now()) {
  const value = header?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  // Every HTTP-date form (RFC 9110, 5.6.7) begins with the day's name. Date.parse alone would take
  // "1.5" or "-1" for days in 2001, and so a retry at once.
  if (!HTTP_DATE_START.test(value)) return undefined;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

const HTTP_DATE_START = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)/;

/** @param {number} ms */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
