/** @typedef {import('./load-env.js').Declarations} Declarations */

/**
 * defaultText: a value, "unset", "required" or a rule.
 * @typedef {{ name: string, kind: string, defaultText: string,
 *   description: string }} VariableDescription
 */

/** @param {unknown} value */
const show = (value) => (typeof value === 'boolean' ? (value ? 'on' : 'off') : String(value));

/** In declaration order. @param {Declarations} declarations @returns {VariableDescription[]} */
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

/** A command's --help: name → one line. @param {Declarations} declarations */
export function environmentHelp(declarations) {
  return Object.fromEntries(
    describeEnv(declarations).map((d) => [
      d.name,
      `${d.description}; ${d.kind} ` +
        `${d.defaultText === 'required' ? '(required)' : `(default: ${d.defaultText})`}`,
    ]),
  );
}
