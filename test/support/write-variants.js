import { INSERT_STRATEGIES } from '../../service/src/users/insert-strategies.js';

/**
 * Every way the service can write, for the contract tests to run under each: every
 * INSERT_STRATEGY, with group commit on and off.
 */
export const WRITE_VARIANTS = INSERT_STRATEGIES.flatMap((strategy) =>
  ['on', 'off'].map((groupCommit) => ({
    label: `INSERT_STRATEGY=${strategy}, GROUP_COMMIT=${groupCommit}`,
    env: { INSERT_STRATEGY: strategy, GROUP_COMMIT: groupCommit },
  })),
);
