/**
 * Variables of the environment that are missing or wrong: what every configuration loader throws,
 * so a bad start names each variable at once rather than one per attempt.
 */
export class ConfigError extends Error {
  /**
   * @param {string} variable  the first (or only) variable at fault
   * @param {string} problem   what is wrong with it, as a sentence that follows its name
   * @param {{ variable: string, problem: string }[]} [problems]  every problem found, when several
   */
  constructor(variable, problem, problems = [{ variable, problem }]) {
    super(problems.map((p) => `${p.variable} ${p.problem}`).join('; '));
    this.name = 'ConfigError';
    this.variable = variable;
    this.problem = problem;
    this.problems = problems;
  }
}
