import { environmentHelp } from '@sluice/env';

/**
 * The environment part of a local command's --help, made from declarations: this image has no
 * db/command-line.js, whose createCommand lays out the same list for every other command.
 * @param {[heading: string, declarations: import('@sluice/env/load-env').Declarations][]} groups
 */
export function environmentSection(groups) {
  const entries = groups.map(
    ([heading, declarations]) =>
      /** @type {const} */ ([heading, Object.entries(environmentHelp(declarations))]),
  );
  const width = Math.max(...entries.flatMap(([, items]) => items.map(([name]) => name.length))) + 2;
  return entries
    .map(
      ([heading, items]) =>
        `\n${heading}\n${items.map(([name, text]) => `  ${name.padEnd(width)}${text}`).join('\n')}`,
    )
    .join('\n');
}
