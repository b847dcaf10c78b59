// The statistics the benchmarks quote, written once, so that every "median" in a report means the
// same thing: of an even count, the mean of the two middle values (not the upper one of them).

/** An ascending copy: the caller's array keeps its order. @param {readonly number[]} xs */
const ascending = (xs) => [...xs].sort((a, b) => a - b);

/**
 * The middle value; of an even count, the mean of the two middle ones. NaN when there is none, so
 * that a figure computed from it prints as missing rather than as a number.
 * @param {readonly number[]} xs
 */
export function median(xs) {
  if (xs.length === 0) return NaN;
  const s = ascending(xs);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/**
 * The smallest and the largest value, the spread a median is quoted with ("5.35 (4.32 – 5.92)").
 * NaN for both when there is none. A loop rather than Math.min(...xs): a spread of a few hundred
 * thousand arguments overflows the stack.
 * @param {readonly number[]} xs
 */
export function range(xs) {
  if (xs.length === 0) return { min: NaN, max: NaN };
  let min = xs[0],
    max = xs[0];
  for (const x of xs) {
    if (x < min) min = x;
    if (x > max) max = x;
  }
  return { min, max };
}

/**
 * The nearest-rank percentile: the smallest value with at least a share q of all the values at or
 * below it (q 0.99 of 103 values: the 102nd smallest), always one of the values measured. undefined
 * when there is none: a window with no request of a kind has no p99.
 * @param {readonly number[]} xs @param {number} q  from 0 to 1
 * @returns {number | undefined}
 */
export function percentile(xs, q) {
  if (xs.length === 0) return undefined;
  const s = ascending(xs);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
}
