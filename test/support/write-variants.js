import { STRATEGIES } from '../../service/src/users/user-repository.js';

/**
 * Every way the service can write, for the contract tests to run under each: every
 * INSERT_STRATEGY, with group commit on and off.
 */
export const WRITE_VARIANTS = Object.keys(STRATEGIES).flatMap((strategy) =>
  ['on', 'off'].map((groupCommit) => ({
    label: `INSERT_STRATEGY=${strategy}, GROUP_COMMIT=${groupCommit}`,
    env: { INSERT_STRATEGY: strategy, GROUP_COMMIT: groupCommit },
  })),
);
