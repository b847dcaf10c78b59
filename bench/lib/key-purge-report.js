/**
 * One sample of the key table during the purge soak.
 * @typedef {object} KeySample
 * @property {number} t         seconds since the traffic started
 * @property {number} keys      rows in idempotency_keys
 * @property {number} expired   of them, expired and not yet purged
 * @property {number} bytes     pg_total_relation_size('idempotency_keys'): heap, indexes, TOAST
 * @property {number} deadRows  n_dead_tup: rows deleted and not yet vacuumed
 * @property {number} autovacuums  autovacuum runs on the table so far
 * @property {number} keysPerSec   keyed requests answered 201 per second in the window
 */

/**
 * Where the samples judged begin: after `warmupS` and after the first autovacuum of the table
 * (before it the size grows by the dead rows the purge leaves, by design); undefined when
 * autovacuum never ran. @param {KeySample[]} samples @param {number} warmupS
 */
export function warmupEnd(samples, warmupS) {
  const vacuumed = samples.find((s) => s.autovacuums > 0);
  return vacuumed === undefined ? undefined : Math.max(warmupS, vacuumed.t);
}

/** @param {number[]} xs */
const max = (xs) => Math.max(...xs);

/**
 * Whether the key table stayed flat: the samples after `warmupS`, in thirds; the last third's
 * maximum rows and size against the first third's, each within `tolerance` (a ratio). Maxima, as
 * the size saws between autovacuum runs and its peaks are what the disk must hold. undefined when
 * fewer than three samples follow the warm-up.
 * @param {KeySample[]} samples @param {{ warmupS: number, tolerance: number }} options
 */
export function keyTableFlatness(samples, { warmupS, tolerance }) {
  const kept = samples.filter((s) => s.t > warmupS);
  if (kept.length < 3) return undefined;
  const third = Math.floor(kept.length / 3);
  const first = kept.slice(0, third);
  const last = kept.slice(kept.length - third);
  /** @param {(s: KeySample) => number} of */
  const compare = (of) => {
    const from = max(first.map(of));
    const to = max(last.map(of));
    return {
      firstMax: from,
      lastMax: to,
      ratio: from === 0 ? (to === 0 ? 1 : Infinity) : to / from,
    };
  };
  const keys = compare((s) => s.keys);
  const bytes = compare((s) => s.bytes);
  return {
    samples: kept.length,
    perThird: third,
    keys,
    bytes,
    flat: keys.ratio <= tolerance && bytes.ratio <= tolerance,
  };
}

const f0 = (/** @type {number} */ v) => Math.round(v).toLocaleString('en-US');

/** The samples as a Markdown table. @param {KeySample[]} samples */
export function keySampleTable(samples) {
  const head = '| t | keys | expired | size MiB | dead rows | autovacuums | keys/s |';
  const lines = [head, head.replace(/[^|]+/g, ' --- ')];
  for (const s of samples) {
    const t = `${Math.floor(s.t / 60)}:${String(Math.round(s.t % 60)).padStart(2, '0')}`;
    lines.push(
      `| ${t} | ${f0(s.keys)} | ${f0(s.expired)} | ${(s.bytes / 2 ** 20).toFixed(1)} | ${f0(s.deadRows)} | ${s.autovacuums} | ${f0(s.keysPerSec)} |`,
    );
  }
  return lines.join('\n');
}
