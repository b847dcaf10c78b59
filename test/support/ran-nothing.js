// npm test's rule for a file in which no test ran (none registered, or every one skipped or todo):
// it fails, since a green file that checked nothing reads as a file that checked something, unless
// a line of its own says why it may: `// sluice-test: may-run-nothing because <why>` (docs/testing.md).

/** What the marker line starts with, after its indentation. */
export const MAY_RUN_NOTHING = '// sluice-test: may-run-nothing because ';
/** A reason shorter than this says nothing. */
const MIN_REASON_CHARS = 10;

/** A file's counts (file-reporter.js): tests, pass, fail, cancelled, skipped, todo. @typedef {Record<string, unknown>} Counts */

/** No test of the file ran and passed: none registered, or each skipped or todo. @param {Counts} counts */
export function ranNothing(counts) {
  return (counts.pass ?? 0) === 0 && (counts.fail ?? 0) === 0 && (counts.cancelled ?? 0) === 0;
}

/** The reason a file's marker line gives, or undefined when it has none that says one. @param {string} source */
export function mayRunNothingBecause(source) {
  for (const line of source.split('\n')) {
    const trimmed = line.trim();
    if (!trimmed.startsWith(MAY_RUN_NOTHING)) continue;
    const reason = trimmed.slice(MAY_RUN_NOTHING.length).trim();
    if (reason.length >= MIN_REASON_CHARS) return reason;
  }
  return undefined;
}

/**
 * Why a file whose run ended with `counts` fails under this rule, or undefined when it does not.
 * @param {Counts} counts @param {string} source  the test file's text
 */
export function ranNothingProblem(counts, source) {
  if (!ranNothing(counts) || mayRunNothingBecause(source) !== undefined) return undefined;
  const what =
    (counts.tests ?? 0) === 0
      ? 'it registers no test'
      : `each of its ${counts.tests} tests was skipped or todo`;
  return `no test ran (${what}): add one, or say why it may not with a line "${MAY_RUN_NOTHING}..."`;
}
