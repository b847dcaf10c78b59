/**
 * A variable of the environment that is missing or wrong: what every configuration loader of the
 * service's image throws (the service's config.js, database-url.js for it and for migrations), so a
 * bad start names the variable. (The feeder, bundled and deployed alone, keeps its own.)
 */
export class ConfigError extends Error {
  /** @param {string} variable @param {string} problem */
  constructor(variable, problem) {
    super(`${variable} ${problem}`);
    this.name = 'ConfigError';
    this.variable = variable;
    this.problem = problem;
  }
}
