// The capacity experiment: closed-loop k6 (no sleep) against the naive baseline and sluice's
// variants, interleaved so that a sluice/naive ratio survives a noisy machine.

/**
 * sluice variants: the environment the service process gets. Adding a variant is one line.
 * @type {Record<string, Record<string, string>>}
 */
export const VARIANTS = {
  default: {},
  unnest: { INSERT_STRATEGY: 'unnest' },
  copy: { INSERT_STRATEGY: 'copy' },
  'group-commit-off': { GROUP_COMMIT: 'off' },
};

/**
 * @typedef {object} Load
 * @property {string} id          what --loads names
 * @property {string} script      the k6 script under k6/
 * @property {number} size        users per request
 * @property {number} vus
 * @property {boolean} [replay]   REPLAY=1: every other request resends stored users
 * @property {string[]} [variants] only these variants (default: every selected one)
 * @property {boolean} [baseline] false: no naive runs (the naive endpoint fails on replays)
 */

/** @type {Load[]} */
export const LOADS = [
  { id: '1x100', script: 'stress-test-one.js', size: 1, vus: 100 },
  { id: '1000x8', script: 'stress-test-batch.js', size: 1000, vus: 8 },
  { id: '1000x100', script: 'stress-test-batch.js', size: 1000, vus: 100 },
  // The naive endpoint has no ON CONFLICT: a replay is a 500 there, so this load is sluice's alone.
  { id: '1000x8-replay', script: 'stress-test-batch.js', size: 1000, vus: 8, replay: true, variants: ['default', 'copy'], baseline: false },
];

/**
 * @typedef {object} PlannedRun
 * @property {Load} load
 * @property {'naive' | 'sluice'} target
 * @property {string} variant   'naive' for the baseline
 * @property {number} round     0-based; the naive run after the last round has round === rounds
 */

/**
 * The order of runs. Per load: naive, every variant, naive, every variant, ..., naive: each round
 * of variants sits between two naive runs, and its ratios divide by their mean, so a drift of the
 * machine over the round cancels out instead of landing on whichever variant ran last.
 * @param {Load[]} loads @param {string[]} variants @param {number} rounds
 * @returns {PlannedRun[]}
 */
export function planRuns(loads, variants, rounds) {
  /** @type {PlannedRun[]} */
  const plan = [];
  for (const load of loads) {
    const own = variants.filter((v) => !load.variants || load.variants.includes(v));
    if (own.length === 0) continue;
    const baseline = load.baseline !== false;
    for (let round = 0; round < rounds; round++) {
      if (baseline) plan.push({ load, target: 'naive', variant: 'naive', round });
      for (const variant of own) plan.push({ load, target: 'sluice', variant, round });
    }
    if (baseline) plan.push({ load, target: 'naive', variant: 'naive', round: rounds });
  }
  return plan;
}

/** @param {number[]} xs */
export function median(xs) {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

/**
 * @typedef {object} RunResult
 * @property {string} load @property {string} variant @property {number} round
 * @property {number} usersPerSec  rows written per second (ground truth)
 * @property {number} [sentPerSec] users sent per second (replays included)
 * @property {number} p99 @property {number} errors
 * @property {number} serviceCpuSeconds @property {number} servicePeakRssMiB @property {number} dbCpuSeconds
 */

/**
 * One line per load and variant: medians over rounds, and the sluice/naive ratio of each round
 * (its users/s over the mean of the naive runs either side), the median quoted.
 * @param {RunResult[]} runs
 */
export function summarise(runs) {
  const loads = [...new Set(runs.map((r) => r.load))];
  return loads.flatMap((load) => {
    const ofLoad = runs.filter((r) => r.load === load);
    const naive = ofLoad.filter((r) => r.variant === 'naive');
    const naiveAt = (/** @type {number} */ round) => naive.find((r) => r.round === round)?.usersPerSec;
    const variants = [...new Set(ofLoad.map((r) => r.variant).filter((v) => v !== 'naive'))];
    const pick = (/** @type {RunResult[]} */ rs, /** @type {(r: RunResult) => number} */ f) => (rs.length ? median(rs.map(f)) : undefined);
    return variants.map((variant) => {
      const own = ofLoad.filter((r) => r.variant === variant);
      const ratios = own.flatMap((r) => {
        const around = [naiveAt(r.round), naiveAt(r.round + 1)].filter((v) => v !== undefined);
        return around.length ? [r.usersPerSec / (around.reduce((a, b) => a + b, 0) / around.length)] : [];
      });
      return {
        load,
        variant,
        rounds: own.length,
        usersPerSec: /** @type {number} */ (pick(own, (r) => r.usersPerSec)),
        sentPerSec: pick(own, (r) => r.sentPerSec ?? r.usersPerSec),
        ratio: ratios.length ? median(ratios) : undefined,
        ratios,
        p99: /** @type {number} */ (pick(own, (r) => r.p99)),
        errors: own.reduce((a, r) => a + r.errors, 0),
        serviceCpuSeconds: /** @type {number} */ (pick(own, (r) => r.serviceCpuSeconds)),
        servicePeakRssMiB: /** @type {number} */ (pick(own, (r) => r.servicePeakRssMiB)),
        dbCpuSeconds: /** @type {number} */ (pick(own, (r) => r.dbCpuSeconds)),
        naive: naive.length
          ? {
              usersPerSec: /** @type {number} */ (pick(naive, (r) => r.usersPerSec)),
              p99: /** @type {number} */ (pick(naive, (r) => r.p99)),
              errors: naive.reduce((a, r) => a + r.errors, 0),
              serviceCpuSeconds: /** @type {number} */ (pick(naive, (r) => r.serviceCpuSeconds)),
              servicePeakRssMiB: /** @type {number} */ (pick(naive, (r) => r.servicePeakRssMiB)),
              dbCpuSeconds: /** @type {number} */ (pick(naive, (r) => r.dbCpuSeconds)),
            }
          : undefined,
      };
    });
  });
}

/** @typedef {ReturnType<typeof summarise>[number]} CapacityLine */
