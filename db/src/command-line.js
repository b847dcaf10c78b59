/**
 * The command line of every sluice command, on commander: `-h`/`--help` prints the usage (what the
 * command does, its options with their defaults, the environment variables it reads) and exits 0;
 * an unknown option, a bad or missing value or an unexpected argument prints one line naming it,
 * then the usage, and exits 2. A command parses its arguments before it imports or starts anything
 * heavy, so both answers come at once and start nothing.
 *
 * It lives in @sluice/db because every command but the feeder's two can reach it there: the root
 * scripts and benchmarks, and the service image's two commands (migrate, the service), whose image
 * holds db/ and service/ only. lambda/bin/ cannot (the feeder's image holds lambda/ only, and
 * `sam build` installs lambda/'s dependencies from npm), so its commands set the same three
 * commander options themselves.
 */
import { Command, Help, InvalidArgumentError, Option } from 'commander';

export { InvalidArgumentError, Option };

/** The exit code of a usage error, as POSIX utilities and Python's argparse use it (commander's own is 1). */
const USAGE_ERROR = 2;

/**
 * @param {string} invocation  what a person types before the options, e.g. `npm run bench:db --`
 * @param {string} description  what the command does
 * @param {Record<string, string>} [environment]  each variable the command reads → its meaning and default
 */
export function createCommand(invocation, description, environment = {}) {
  const names = Object.keys(environment);
  return new Command(invocation)
    .description(description)
    .helpOption('-h, --help', 'print this usage and exit')
    .showHelpAfterError()
    .exitOverride((err) => process.exit(err.exitCode === 0 ? 0 : USAGE_ERROR))
    .configureHelp({
      // The variables as one more list after the options, aligned and wrapped by commander's own layout.
      padWidth: (cmd, helper) => Math.max(Help.prototype.padWidth.call(helper, cmd, helper), ...names.map((n) => n.length)),
      formatHelp(cmd, helper) {
        const items = Object.entries(environment).map(([name, text]) => helper.formatItem(name, helper.padWidth(cmd, helper), text, helper));
        return [Help.prototype.formatHelp.call(helper, cmd, helper), ...helper.formatItemList('Environment:', items, helper)].join('\n');
      },
    });
}

/**
 * An option's parser: a whole number of at least `min`.
 * @param {number} [min]
 */
export function wholeNumber(min = 1) {
  return (/** @type {string} */ value) => {
    if (!/^\d+$/.test(value) || Number(value) < min) throw new InvalidArgumentError(`Expected a whole number of at least ${min}.`);
    return Number(value);
  };
}

/**
 * An option's parser: a comma-separated list, each item one of `allowed`.
 * @param {readonly string[]} allowed
 */
export function listOf(allowed) {
  return (/** @type {string} */ value) => {
    const items = value.split(',').map((s) => s.trim()).filter(Boolean);
    const unknown = items.filter((i) => !allowed.includes(i));
    if (items.length === 0 || unknown.length) {
      throw new InvalidArgumentError(`${unknown.length ? `Unknown: ${unknown.join(', ')}. ` : ''}Expected one or more of ${allowed.join(', ')}, separated by commas.`);
    }
    return items;
  };
}

// What a probe gives a variable: any string does, and a URL for the loaders that want one.
const PLACEHOLDER = 'http://placeholder.invalid';

/**
 * The environment variables a configuration loader reads, each with its default, found by running
 * the loader on an environment that records every name asked for: a variable added to the loader
 * appears in the usage without being listed again. A variable read only when another is set (PGUSER
 * when PGHOST is) is found by setting each unset one in turn, and shown after it. The default is the
 * value of the configuration's field of the same name in camelCase (PORT → port); a variable without
 * such a field shows none.
 *
 * @param {(env: NodeJS.ProcessEnv) => unknown} load  reads the environment; may throw an error
 *   whose `variable` names one it found missing or bad
 * @returns {Record<string, string>}  name → its default, in the order the loader reads them
 */
export function variablesReadBy(load) {
  /** @param {Record<string, string>} given @param {Set<string>} read */
  const run = (given, read) => {
    const env = new Proxy(given, {
      get: (target, name) => {
        if (typeof name === 'string') read.add(name);
        return target[/** @type {string} */ (name)];
      },
    });
    try {
      return { config: load(env) };
    } catch (err) {
      return { error: /** @type {Error & { variable?: string }} */ (err) };
    }
  };
  /** The names read once `name` is set, with whatever it then turns out to need. @param {string} name */
  const probe = (name) => {
    /** @type {Set<string>} */
    const read = new Set();
    /** @type {Record<string, string>} */
    const given = { [name]: PLACEHOLDER };
    for (;;) {
      const missing = run(given, read).error?.variable;
      if (!missing || missing in given) return read;
      given[missing] = PLACEHOLDER;
    }
  };

  /** @type {Set<string>} */
  const baseRead = new Set();
  const base = run({}, baseRead);
  if (base.error) throw new Error(`variablesReadBy: the loader must accept an empty environment, but: ${base.error.message}`);
  const defaults = /** @type {Record<string, unknown>} */ (typeof base.config === 'object' && base.config !== null ? base.config : {});
  const field = (/** @type {string} */ name) => name.toLowerCase().replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());

  const names = [...baseRead];
  /** @type {Map<string, string>} a name found by a probe → the name set to find it */
  const readWhenSet = new Map();
  for (let i = 0; i < names.length; i++) {
    if (defaults[field(names[i])] !== undefined) continue;
    const more = [...probe(names[i])].filter((n) => !names.includes(n));
    for (const n of more) readWhenSet.set(n, names[i]);
    names.splice(i + 1, 0, ...more);
  }
  return Object.fromEntries(names.map((name) => {
    const value = defaults[field(name)];
    if (field(name) in defaults) return [name, `(default: ${value === undefined ? 'unset' : typeof value === 'boolean' ? (value ? 'on' : 'off') : value})`];
    return [name, readWhenSet.has(name) ? `(read when ${readWhenSet.get(name)} is set)` : ''];
  }));
}
