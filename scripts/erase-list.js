// What `npm run erase` is asked to erase: emails from its arguments or from a file (one a line,
// blank lines and `#` comments skipped, `-` for stdin), each checked as POST /erasures checks an
// item, every position at fault named before anything is erased. What a person is told names
// positions, never an email.
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { InvalidBatchError } from '../service/src/errors.js';
import { checkErasures } from '../service/src/users/erasure-items.js';

/** @import { Erasure } from '../service/src/users/erase.js' */

/** An email as given, and where: `line 3` of the file, `argument 2`. */
/** @typedef {{ email: string, at: string }} Listed */

/** Positions at fault a refusal names; the rest are counted. */
const SHOWN_PROBLEMS = 10;

/** Some emails are not valid: nothing is erased. */
export class InvalidListError extends Error {
  /** @param {string} message @param {string[]} problems  one line each, naming a position */
  constructor(message, problems) {
    super(message);
    this.name = 'InvalidListError';
    this.problems = problems;
  }
}

/**
 * The emails of the arguments, or of `file`'s lines.
 * @param {{ emails: string[], file?: string }} source @returns {Promise<Listed[]>}
 */
export async function listedEmails({ emails, file }) {
  if (file === undefined) return emails.map((email, i) => ({ email, at: `argument ${i + 1}` }));
  const input = file === '-' ? process.stdin : createReadStream(file);
  /** @type {Listed[]} */
  const listed = [];
  let line = 0;
  for await (const text of createInterface({ input, crlfDelay: Infinity })) {
    line++;
    const email = text.trim();
    if (email !== '' && !email.startsWith('#')) listed.push({ email, at: `line ${line}` });
  }
  return listed;
}

/**
 * Each email once (as stored: lower-cased), with the erasure's time when one is given; an
 * InvalidListError when any is not valid.
 * @param {Listed[]} listed @param {string} [changedAt] @returns {Erasure[]}
 */
export function checkedErasures(listed, changedAt) {
  let erasures;
  try {
    erasures = checkErasures(
      listed.map(({ email }) => (changedAt ? { email, changedAt } : { email })),
    );
  } catch (err) {
    if (!(err instanceof InvalidBatchError)) throw err;
    const problems = err.errors.map((e) => `${listed[e.index].at}: ${e.field} ${e.message}`);
    throw new InvalidListError(err.message, [
      ...problems.slice(0, SHOWN_PROBLEMS),
      ...(problems.length > SHOWN_PROBLEMS ? [`(the first ${SHOWN_PROBLEMS} shown)`] : []),
    ]);
  }
  /** @type {Map<string, Erasure>} */
  const distinct = new Map();
  for (const erasure of erasures)
    if (!distinct.has(erasure.email)) distinct.set(erasure.email, erasure);
  return [...distinct.values()];
}
