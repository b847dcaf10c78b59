// Upper bounds on wall-clock time in tests (an answer "without waiting", a drain "within" so long)
// are multiplied by SLUICE_TEST_TIME_FACTOR (default 3), so that a busy 2-core machine passes where
// the bound is not the point; lower bounds (a wait the contract requires) are never scaled.
const factor = Number(process.env.SLUICE_TEST_TIME_FACTOR ?? 3);
if (!(factor >= 1)) throw new Error(`SLUICE_TEST_TIME_FACTOR must be a number >= 1, got ${process.env.SLUICE_TEST_TIME_FACTOR}`);

/** An upper bound of `ms` milliseconds, scaled for the machine. @param {number} ms */
export const within = (ms) => ms * factor;
