import { ConfigError } from './config-error.js';

/**
 * @template T
 * @typedef {import('./parsers.js').Parser<T>} Parser
 */

/**
 * One variable, declared once: how it is parsed, its default and what it is for. The loader,
 * --help and docs/configuration.md are all made from this.
 *
 * @template [T=unknown]
 * @typedef {object} Variable
 * @property {string} description  one line: what it does
 * @property {Parser<T>} parser
 * @property {T} [default]  the value when unset (blank counts as unset)
 * @property {string} [defaultText]  the default in words, when a rule of the loader makes it
 * @property {boolean} [required]  unset is an error
 */

/** @typedef {Record<string, Variable<any>>} Declarations */

/* eslint-disable jsdoc/valid-types -- a mapped type with -readonly, TypeScript syntax the jsdoc parser does not read; tsc checks it */
/**
 * What loadEnv returns for declarations D: each variable's parsed value, `undefined` possible
 * only for a variable with neither a default nor `required: true`.
 * @template {Declarations} D
 * @typedef {{ -readonly [K in keyof D]: D[K] extends { parser: Parser<infer T> } ? (D[K] extends { default: {} } | { required: true } ? T : T | undefined) : never }} Values
 */
/* eslint-enable jsdoc/valid-types */

/**
 * Declares a component's variables: the identity, there for the types (each default and
 * `required: true` kept as written, so the loader's result is typed exactly).
 * @template {Declarations} const D
 * @param {D} declarations
 * @returns {D}
 */
export const defineVariables = (declarations) => declarations;

/**
 * A problem a component's own rule finds, across variables (e.g. two that exclude each other).
 * @typedef {{ variable: string, problem: string }} Problem
 */

/**
 * Reads every declared variable from `env`: a blank one is unset. Every problem is collected and
 * thrown as one ConfigError, so a bad start names them all.
 *
 * @template {Declarations} D
 * @param {D} declarations
 * @param {NodeJS.ProcessEnv} env
 * @param {(values: Values<D>) => Problem[]} [rules]  checks across variables, run on the values read
 * @returns {Values<D>}
 */
export function loadEnv(declarations, env, rules) {
  /** @type {Record<string, unknown>} */
  const values = {};
  /** @type {Problem[]} */
  const problems = [];
  for (const [name, variable] of Object.entries(declarations)) {
    const raw = env[name];
    if (raw === undefined || raw.trim() === '') {
      values[name] = variable.default;
      if (variable.required) problems.push({ variable: name, problem: 'is required' });
      continue;
    }
    try {
      values[name] = variable.parser.parse(raw);
    } catch (err) {
      if (!(err instanceof TypeError)) throw err;
      problems.push({ variable: name, problem: err.message });
    }
  }
  const typed = /** @type {Values<D>} */ (values);
  if (rules) problems.push(...rules(typed));
  if (problems.length) throw new ConfigError(problems[0].variable, problems[0].problem, problems);
  return typed;
}
