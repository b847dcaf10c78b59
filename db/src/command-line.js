// The command line of every sluice command: `--help` prints the usage (options, defaults, the
// environment read) and exits 0; a usage error prints one line naming it, then the usage, and exits
// 2. A command parses its arguments before it imports or starts anything heavy. It lives in
// @sluice/db, which every command but the feeder's can reach (the service image holds db/ and
// service/ only); lambda/bin/ sets the same three commander options itself.
import { Command, Help, InvalidArgumentError, Option } from 'commander';
import { integer } from '@sluice/env';

export { InvalidArgumentError, Option };

/** As POSIX utilities and Python's argparse use it (commander's own is 1). */
const USAGE_ERROR = 2;

/**
 * @param {string} invocation  what a person types before the options, e.g. `npm run bench:db --`
 * @param {string} description
 * @param {Record<string, string>} [environment] environmentHelp(declarations) of @sluice/env, so
 *   the usage is made from the declarations the loaders read
 */
export function createCommand(invocation, description, environment = {}) {
  const names = Object.keys(environment);
  return new Command(invocation)
    .description(description)
    .helpOption('-h, --help', 'print this usage and exit')
    .showHelpAfterError()
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : USAGE_ERROR))
    .configureHelp({
      // The variables as one more list, aligned and wrapped by commander's own layout.
      padWidth: (cmd, helper) =>
        Math.max(Help.prototype.padWidth.call(helper, cmd, helper), ...names.map((n) => n.length)),
      formatHelp(cmd, helper) {
        const items = Object.entries(environment).map(([name, text]) =>
          helper.formatItem(name, helper.padWidth(cmd, helper), text, helper),
        );
        return [
          Help.prototype.formatHelp.call(helper, cmd, helper),
          ...helper.formatItemList('Environment:', items, helper),
        ].join('\n');
      },
    });
}

/** An option's parser. @param {number} [min] */
export function wholeNumber(min = 1) {
  const parser = integer({ min });
  return (/** @type {string} */ value) => {
    try {
      return parser.parse(value);
    } catch {
      throw new InvalidArgumentError(`Expected a whole number of at least ${min}.`);
    }
  };
}

/** An option's parser: a comma-separated list. @param {readonly string[]} allowed */
export function listOf(allowed) {
  return (/** @type {string} */ value) => {
    const items = value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const unknown = items.filter((i) => !allowed.includes(i));
    if (items.length === 0 || unknown.length) {
      throw new InvalidArgumentError(
        `${unknown.length ? `Unknown: ${unknown.join(', ')}. ` : ''}Expected ` +
          `one or more of ${allowed.join(', ')}, separated by commas.`,
      );
    }
    return items;
  };
}
