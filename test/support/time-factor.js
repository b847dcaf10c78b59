// Upper bounds on wall-clock time in tests are scaled by SLUICE_TEST_TIME_FACTOR (default 3, for a
// busy 2-core machine); lower bounds, the contract, never are.
const factor = Number(process.env.SLUICE_TEST_TIME_FACTOR ?? 3);
if (!(factor >= 1))
  throw new Error(
    `SLUICE_TEST_TIME_FACTOR must be a number >= 1, got ${process.env.SLUICE_TEST_TIME_FACTOR}`,
  );

/** An upper bound of `ms` milliseconds, scaled for the machine. @param {number} ms */
export const within = (ms) => ms * factor;
