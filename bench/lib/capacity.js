// The capacity experiment: closed-loop k6 (no sleep) against the naive baseline and sluice's
// variants, interleaved so that a sluice/naive ratio survives a noisy machine.
import { createHmac } from 'node:crypto';
import { median } from './stats.js';

/**
 * Credentials, side by side: `token` is one static INGEST_TOKEN, the reference the other
 * two are compared with; `tokens` is INGEST_TOKENS with eight clients (every one compared at each
 * request, the bench's among them); `jwt` is an HS256 JWT checked for signature, exp, aud and role
 * (remembered once verified, as PostgREST's cache does). k6 sends each its TOKEN (credentialsFor).
 * Bench-only values, generated nowhere else.
 */
const BENCH_TOKEN = 'bench-client-token-0123456789abcdefghijklmnop';
const BENCH_JWT_SECRET = 'bench-jwt-secret-0123456789abcdefghijklmnop';
/**
 * sluice variants: the environment the service process gets. Adding a variant is one line.
 * @type {Record<string, Record<string, string>>}
 */
export const VARIANTS = {
  default: {},
  unnest: { INSERT_STRATEGY: 'unnest' },
  copy: { INSERT_STRATEGY: 'copy' },
  'group-commit-off': { GROUP_COMMIT: 'off' },
  // Tracing on, default sampler, exporting (protobuf, batched) to a local receiver that run.js
  // starts and names in OTEL_EXPORTER_OTLP_ENDPOINT. Opt-in: --variants default,tracing.
  tracing: { OTEL_TRACES_EXPORTER: 'otlp' },
  // Tracing on, one request in ten sampled (a trace begun by a caller keeps the caller's decision).
  'tracing-sampled': {
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: '0.1',
  },
  // Tracing on, only the traces a caller sampled (the bench's callers send no traceparent): what
  // tracing costs a request that records nothing.
  'tracing-unsampled': {
    OTEL_TRACES_EXPORTER: 'otlp',
    OTEL_TRACES_SAMPLER: 'parentbased_always_off',
  },
  // Tracing on, every request sampled, exported as OTLP/JSON instead of protobuf.
  'tracing-json': { OTEL_TRACES_EXPORTER: 'otlp', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' },
  // Credentials, opt-in: token is the reference for tokens and jwt (see BENCH_TOKEN).
  token: { INGEST_TOKEN: BENCH_TOKEN },
  tokens: {
    INGEST_TOKENS: JSON.stringify(
      Object.fromEntries([
        ...Array.from({ length: 7 }, (_, i) => [`client-${i}`, `${BENCH_TOKEN}-${i}`]),
        ['bench', BENCH_TOKEN],
      ]),
    ),
  },
  jwt: { JWT_SECRET: BENCH_JWT_SECRET, JWT_AUDIENCE: 'sluice' },
  // Through PgBouncer 1.18 in transaction mode (pool as large as the service's), which run.js starts
  // in front of the bench's PostgreSQL and puts in place of THROUGH_POOLER: what a pooler costs.
  pgbouncer: { DATABASE_URL: 'THROUGH_POOLER' },
};

/** The DATABASE_URL a variant names to be sent through the bench's PgBouncer. */
export const THROUGH_POOLER = 'THROUGH_POOLER';

/**
 * What k6 sends as TOKEN to a variant: the static token, or an HS256 JWT signed now (valid for a
 * day; signed with node:crypto, which is all HS256 is, so the bench needs no JWT library of its
 * own); nothing for the variants without authentication.
 * @param {string} variant  a variant's own name (baseVariant)
 * @returns {Promise<Record<string, string>>}
 */
export async function credentialsFor(variant) {
  if (variant === 'token' || variant === 'tokens') return { TOKEN: BENCH_TOKEN };
  if (variant !== 'jwt') return {};
  const now = Math.floor(Date.now() / 1000);
  const part = (/** @type {object} */ json) =>
    Buffer.from(JSON.stringify(json)).toString('base64url');
  const signed = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ role: 'service_role', sub: 'bench', aud: 'sluice', iat: now, exp: now + 86_400 })}`;
  return {
    TOKEN: `${signed}.${createHmac('sha256', BENCH_JWT_SECRET).update(signed).digest('base64url')}`,
  };
}

/** Variants run only when --variants names them. */
export const OPT_IN_VARIANTS = [
  'tracing',
  'tracing-sampled',
  'tracing-unsampled',
  'tracing-json',
  'pgbouncer',
  'token',
  'tokens',
  'jwt',
];

/**
 * The suffix of a variant run on another checkout (`--compare`): `default@compare` is the other
 * service under the default variant's environment, interleaved with this one's.
 */
export const COMPARED = '@compare';
/** A variant's own name, without the suffix of `--compare`. @param {string} variant */
export const baseVariant = (variant) =>
  variant.endsWith(COMPARED) ? variant.slice(0, -COMPARED.length) : variant;

/**
 * @typedef {object} Load
 * @property {string} id          what --loads names
 * @property {string} script      the k6 script under k6/
 * @property {number} size        users per request
 * @property {number} vus
 * @property {Record<string, string>} [env]  more for k6: REPLAY (1: every other request resends
 *   stored users; changed: with new names), RESOLUTION (merge: Prefer: resolution=merge-duplicates),
 *   CHANGED_AT (1: every user carries changedAt, merge mode's ordering value; a changed replay a newer one),
 *   RETURN (representation: Prefer: return=representation, count=exact)
 * @property {string[]} [variants] only these variants (default: every selected one)
 * @property {boolean} [baseline] false: no naive or no-op runs (the naive endpoint fails on replays
 *   and cannot merge)
 * @property {string} [against]  another load without a baseline that this one is measured against,
 *   round by round and variant by variant (users/s and CPU a user as ratios): what one difference
 *   between the two loads costs
 */

/** @type {Load[]} */
export const LOADS = [
  { id: '1x100', script: 'stress-test-one.js', size: 1, vus: 100 },
  { id: '1000x8', script: 'stress-test-batch.js', size: 1000, vus: 8 },
  { id: '1000x100', script: 'stress-test-batch.js', size: 1000, vus: 100 },
  // The naive endpoint has no ON CONFLICT: a replay is a 500 there, so these loads are sluice's alone.
  {
    id: '1000x8-replay',
    script: 'stress-test-batch.js',
    size: 1000,
    vus: 8,
    env: { REPLAY: '1' },
    variants: ['default', 'copy'],
    baseline: false,
  },
  // Merge mode: all new users; a replay of unchanged users; a replay that changes every one.
  {
    id: '1000x8-merge',
    script: 'stress-test-batch.js',
    size: 1000,
    vus: 8,
    env: { RESOLUTION: 'merge' },
    variants: ['default', 'copy'],
    baseline: false,
  },
  {
    id: '1000x8-merge-replay',
    script: 'stress-test-batch.js',
    size: 1000,
    vus: 8,
    env: { RESOLUTION: 'merge', REPLAY: '1' },
    variants: ['default', 'copy'],
    baseline: false,
  },
  {
    id: '1000x8-merge-changed',
    script: 'stress-test-batch.js',
    size: 1000,
    vus: 8,
    env: { RESOLUTION: 'merge', REPLAY: 'changed' },
    variants: ['default', 'copy'],
    baseline: false,
  },
  // The same three with changedAt on every user: what the ordering value costs a merge, each
  // against its load without it.
  {
    id: '1000x8-merge-ordered',
    script: 'stress-test-batch.js',
    size: 1000,
    vus: 8,
    env: { RESOLUTION: 'merge', CHANGED_AT: '1' },
    variants: ['default', 'copy'],
    baseline: false,
    against: '1000x8-merge',
  },
  {
    id: '1000x8-merge-replay-ordered',
    script: 'stress-test-batch.js',
    size: 1000,
    vus: 8,
    env: { RESOLUTION: 'merge', REPLAY: '1', CHANGED_AT: '1' },
    variants: ['default', 'copy'],
    baseline: false,
    against: '1000x8-merge-replay',
  },
  {
    id: '1000x8-merge-changed-ordered',
    script: 'stress-test-batch.js',
    size: 1000,
    vus: 8,
    env: { RESOLUTION: 'merge', REPLAY: 'changed', CHANGED_AT: '1' },
    variants: ['default', 'copy'],
    baseline: false,
    against: '1000x8-merge-changed',
  },
  // PostgREST's return=representation (with count=exact): the rows written come back.
  {
    id: '1000x8-representation',
    script: 'stress-test-batch.js',
    size: 1000,
    vus: 8,
    env: { RETURN: 'representation' },
    variants: ['default'],
    baseline: false,
  },
];

/**
 * The references each load with a baseline runs beside sluice: the naive endpoint sluice replaces
 * (bench/naive/), and a no-op Express endpoint that parses the same JSON and writes nothing
 * (bench/noop/): what any Express service pays per request before doing its job.
 */
export const REFERENCES = /** @type {const} */ (['naive', 'noop']);

/**
 * @typedef {object} PlannedRun
 * @property {Load} load
 * @property {'naive' | 'noop' | 'sluice'} target
 * @property {string} variant   'naive' or 'noop' for the references
 * @property {number} round     0-based; the naive run after the last round has round === rounds
 */

/**
 * The order of runs. Per load with a baseline: naive, no-op, every variant, naive, no-op, every
 * variant, ..., naive: each round of variants sits between two naive runs, and its ratios divide by
 * their mean, so a drift of the machine over the round cancels out instead of landing on whichever
 * variant ran last. The loads without a baseline come after, round by round: every such load's
 * variants in round 1, then in round 2 in the reverse order of loads, and so on, so that a load
 * measured against another (`against`) runs beside it in every round, first as often as second.
 * @param {Load[]} loads @param {string[]} variants @param {number} rounds
 * @returns {PlannedRun[]}
 */
export function planRuns(loads, variants, rounds) {
  /** @type {PlannedRun[]} */
  const plan = [];
  /** @param {Load} load */
  const variantsOf = (load) =>
    variants.filter((v) => !load.variants || load.variants.includes(baseVariant(v)));
  for (const load of loads.filter((l) => l.baseline !== false && variantsOf(l).length > 0)) {
    for (let round = 0; round < rounds; round++) {
      for (const reference of REFERENCES)
        plan.push({ load, target: reference, variant: reference, round });
      for (const variant of variantsOf(load)) plan.push({ load, target: 'sluice', variant, round });
    }
    plan.push({ load, target: 'naive', variant: 'naive', round: rounds });
  }
  const alone = loads.filter((l) => l.baseline === false);
  for (let round = 0; round < rounds; round++) {
    for (const load of round % 2 === 0 ? alone : [...alone].reverse()) {
      for (const variant of variantsOf(load)) plan.push({ load, target: 'sluice', variant, round });
    }
  }
  return plan;
}

/**
 * @typedef {object} RunResult
 * @property {string} load @property {string} variant @property {number} round
 * @property {number} usersPerSec  rows written per second (ground truth)
 * @property {number} [sentPerSec] users sent per second (replays included)
 * @property {number} [sent]       users sent in the run
 * @property {number} [rowUpdates] row versions written by updates in the run (pg_stat_user_tables.n_tup_upd)
 * @property {number} p99 @property {number} errors
 * @property {number} serviceCpuSeconds @property {number} servicePeakRssMiB @property {number} dbCpuSeconds
 * @property {number} [poolerCpuSeconds] the pooler's CPU, when the run went through one
 */

/** CPU microseconds per user sent (per request when each holds one user). @param {number} cpuSeconds @param {RunResult} r */
const perUser = (cpuSeconds, r) => (r.sent ? (cpuSeconds * 1e6) / r.sent : NaN);

/**
 * What a run cost, per user sent: the service's and PostgreSQL's CPU.
 * @param {RunResult[]} rs
 */
function costs(rs) {
  const pick = (/** @type {(r: RunResult) => number} */ f) => median(rs.map(f));
  return {
    usersPerSec: pick((r) => r.usersPerSec),
    p99: pick((r) => r.p99),
    errors: rs.reduce((a, r) => a + r.errors, 0),
    serviceCpuSeconds: pick((r) => r.serviceCpuSeconds),
    servicePeakRssMiB: pick((r) => r.servicePeakRssMiB),
    dbCpuSeconds: pick((r) => r.dbCpuSeconds),
    serviceUsPerUser: pick((r) => perUser(r.serviceCpuSeconds, r)),
    dbUsPerUser: pick((r) => perUser(r.dbCpuSeconds, r)),
    poolerUsPerUser: rs.every((r) => r.poolerCpuSeconds !== undefined)
      ? pick((r) => perUser(/** @type {number} */ (r.poolerCpuSeconds), r))
      : undefined,
  };
}

/**
 * One line per load and variant: medians over rounds, the sluice/naive ratio of each round (its
 * users/s over the mean of the naive runs either side), and the service's CPU a user against the
 * default variant's of the same round; of each ratio the median is quoted.
 * @param {RunResult[]} runs
 */
export function summarise(runs) {
  const loads = [...new Set(runs.map((r) => r.load))];
  return loads.flatMap((load) => {
    const ofLoad = runs.filter((r) => r.load === load);
    const naive = ofLoad.filter((r) => r.variant === 'naive');
    const noop = ofLoad.filter((r) => r.variant === 'noop');
    const naiveAt = (/** @type {number} */ round) =>
      naive.find((r) => r.round === round)?.usersPerSec;
    const variants = [
      ...new Set(
        ofLoad
          .map((r) => r.variant)
          .filter((v) => !(/** @type {readonly string[]} */ (REFERENCES).includes(v))),
      ),
    ];
    const pick = (/** @type {RunResult[]} */ rs, /** @type {(r: RunResult) => number} */ f) =>
      rs.length ? median(rs.map(f)) : undefined;
    return variants.map((variant) => {
      const own = ofLoad.filter((r) => r.variant === variant);
      const ratios = own.flatMap((r) => {
        const around = [naiveAt(r.round), naiveAt(r.round + 1)].filter((v) => v !== undefined);
        return around.length
          ? [r.usersPerSec / (around.reduce((a, b) => a + b, 0) / around.length)]
          : [];
      });
      // The service's CPU a user against the default variant's in the same round (each --compare
      // checkout against its own default): what a variant's targets are set as (tracing's, for one).
      const reference = variant.endsWith(COMPARED) ? `default${COMPARED}` : 'default';
      const cpuVsDefault =
        variant === reference
          ? []
          : own.flatMap((r) => {
              const d = ofLoad.find((x) => x.variant === reference && x.round === r.round);
              const ratio = d
                ? perUser(r.serviceCpuSeconds, r) / perUser(d.serviceCpuSeconds, d)
                : NaN;
              return Number.isFinite(ratio) ? [ratio] : [];
            });
      return {
        load,
        variant,
        rounds: own.length,
        ...againstOf(runs, load, own),
        ...costs(own),
        sentPerSec: pick(own, (r) => r.sentPerSec ?? r.usersPerSec),
        rowUpdates: pick(own, (r) => r.rowUpdates ?? NaN),
        ratio: ratios.length ? median(ratios) : undefined,
        ratios,
        cpuVsDefault: cpuVsDefault.length ? median(cpuVsDefault) : undefined,
        cpuVsDefaultRatios: cpuVsDefault,
        naive: naive.length ? costs(naive) : undefined,
        noop: noop.length ? costs(noop) : undefined,
      };
    });
  });
}

/**
 * A load measured against another (`against`): per round and variant, its users/s, its service's
 * and PostgreSQL's CPU a user, each over the other load's in the same round; medians and rounds.
 * @param {RunResult[]} runs @param {string} load @param {RunResult[]} own  this load's runs of one variant
 */
function againstOf(runs, load, own) {
  const against = LOADS.find((l) => l.id === load)?.against;
  if (!against) return {};
  /** @param {(r: RunResult) => number} f */
  const ratios = (f) =>
    own.flatMap((r) => {
      const other = runs.find(
        (x) => x.load === against && x.variant === r.variant && x.round === r.round,
      );
      const ratio = other ? f(r) / f(other) : NaN;
      return Number.isFinite(ratio) ? [ratio] : [];
    });
  const usersPerSec = ratios((r) => r.usersPerSec);
  const serviceUs = ratios((r) => perUser(r.serviceCpuSeconds, r));
  const dbUs = ratios((r) => perUser(r.dbCpuSeconds, r));
  const med = (/** @type {number[]} */ xs) => (xs.length ? median(xs) : undefined);
  return {
    against: {
      load: against,
      usersPerSec: med(usersPerSec),
      usersPerSecRatios: usersPerSec,
      serviceUsPerUser: med(serviceUs),
      serviceRatios: serviceUs,
      dbUsPerUser: med(dbUs),
      dbRatios: dbUs,
    },
  };
}

/** @typedef {ReturnType<typeof summarise>[number]} CapacityLine */
