import { ConfigError } from './config-error.js';

/** @template T @typedef {import('./parsers.js').Parser<T>} Parser */

/**
 * The loader, --help and docs/configuration.md are made from it. defaultText: the default in
 * words, when a rule makes it.
 * @template [T=unknown]
 * @typedef {{ description: string, parser: Parser<T>, default?: T, defaultText?: string,
 *   required?: boolean }} Variable
 */

/** @typedef {Record<string, Variable<any>>} Declarations */

/* eslint-disable jsdoc/valid-types -- a mapped type with -readonly, TypeScript syntax the jsdoc
   parser does not read; tsc checks it */
/**
 * `undefined` only where there is neither a default nor `required`.
 * @template {Declarations} D
 * @typedef {{ -readonly [K in keyof D]: D[K] extends { parser: Parser<infer T> }
 *   ? (D[K] extends { default: {} } | { required: true } ? T : T | undefined) : never }} Values
 */
/* eslint-enable jsdoc/valid-types */

/**
 * The identity, for the types.
 * @template {Declarations} const D @param {D} declarations @returns {D}
 */
export const defineVariables = (declarations) => declarations;

/** @typedef {{ variable: string, problem: string }} Problem */

/**
 * Every problem, the `rules`' too, thrown as one ConfigError.
 * @template {Declarations} D @param {D} declarations @param {NodeJS.ProcessEnv} env
 * @param {(values: Values<D>) => Problem[]} [rules] @returns {Values<D>}
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
