/** @typedef {import('./load-env.js').Declarations} Declarations */

/**
 * @typedef {{ name: string, kind: string, defaultText: string,
 *   description: string }} VariableDescription defaultText: a value, "unset", "required" or a rule
 */

/** @param {unknown} value */
const show = (value) => (typeof value === 'boolean' ? (value ? 'on' : 'off') : String(value));

/**
 * Every declared variable, in declaration order, in words: for docs/configuration.md.
 * @param {Declarations} declarations
 * @returns {VariableDescription[]}
 */
export function describeEnv(declarations) {
  return Object.entries(declarations).map(([name, v]) => ({
    name,
    kind: v.parser.kind,
    defaultText:
      v.defaultText ??
      (v.default !== undefined ? show(v.default) : v.required ? 'required' : 'unset'),
    description: v.description,
  }));
}

/**
 * The `Environment:` list of a command's --help: name → one line (db/src/command-line.js lays it
 * out).
 * @param {Declarations} declarations
 * @returns {Record<string, string>}
 */
export function environmentHelp(declarations) {
  return Object.fromEntries(
    describeEnv(declarations).map((d) => [
      d.name,
      `${d.description}; ${d.kind} ` +
        `${d.defaultText === 'required' ? '(required)' : `(default: ${d.defaultText})`}`,
    ]),
  );
}
