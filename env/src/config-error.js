/** Every variable at fault at once, so a bad start needs no attempt per variable. */
export class ConfigError extends Error {
  /**
   * @param {string} variable  the first at fault @param {string} problem  follows its name
   * @param {{ variable: string, problem: string }[]} [problems]
   */
  constructor(variable, problem, problems = [{ variable, problem }]) {
    super(problems.map((p) => `${p.variable} ${p.problem}`).join('; '));
    this.name = 'ConfigError';
    this.variable = variable;
    this.problem = problem;
    this.problems = problems;
  }
}
