import { markdownTable as gfmTable } from 'markdown-table';
import { range } from './stats.js';

/**
 * @typedef {object} Row
 * @property {string} name
 * @property {number} itemsPerSec
 * @property {number} [requestsPerSec]
 * @property {number} [p50] @property {number} [p95] @property {number} [p99]  milliseconds
 * @property {number} [errors]
 * @property {number} [serviceCpuSeconds] @property {number} [dbCpuSeconds] @property {number} [servicePeakRssMiB] @property {number} [k6CpuSeconds]
 */

const n0 = (/** @type {number | undefined} */ v) =>
  v === undefined ? '–' : Math.round(v).toLocaleString('en-US');
const n1 = (/** @type {number | undefined} */ v) => (v === undefined ? '–' : v.toFixed(1));

/**
 * The results table: one row per measured run, with the batch/one ratio and each row's share of
 * the COPY ceiling.
 * @param {Row[]} rows
 * @param {number} ceiling  items/s of COPY
 */
export function markdownTable(rows, ceiling) {
  const one = rows.find((r) => r.name === 'one');
  const head = [
    'test',
    'items/s',
    'requests/s',
    'p50 ms',
    'p95 ms',
    'p99 ms',
    'errors',
    'service CPU s',
    'DB CPU s',
    'service peak RSS MiB',
    'k6 CPU s',
    '× one',
    '% of COPY',
  ];
  const body = rows.map((r) => [
    r.name,
    n0(r.itemsPerSec),
    n1(r.requestsPerSec),
    n1(r.p50),
    n1(r.p95),
    n1(r.p99),
    String(r.errors ?? '–'),
    n1(r.serviceCpuSeconds),
    n1(r.dbCpuSeconds),
    n0(r.servicePeakRssMiB),
    n1(r.k6CpuSeconds),
    one ? n1(r.itemsPerSec / one.itemsPerSec) : '–',
    n1((r.itemsPerSec / ceiling) * 100),
  ]);
  return gfmTable([head, ...body], { align: ['l', ...head.slice(1).map(() => 'r')] });
}

/** @param {string} s */
const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');

/**
 * Two bar panels: items/s and p95 latency, one bar per row.
 * @param {Row[]} rows
 * @param {string} caption
 */
export function svgChart(rows, caption) {
  const W = 900,
    H = 360,
    top = 50,
    bottom = 300,
    colours = ['#6b7280', '#2563eb', '#16a34a', '#d97706', '#9333ea', '#dc2626'];
  /** @param {number} x0 @param {string} title @param {(r: Row) => number | undefined} value @param {(v: number) => string} label */
  const panel = (x0, title, value, label) => {
    const width = 400,
      max = Math.max(...rows.map((r) => value(r) ?? 0), 1),
      bw = width / rows.length;
    let out = `<text x="${x0 + width / 2}" y="${top - 20}" text-anchor="middle" font-weight="bold">${esc(title)}</text>`;
    out += `<line x1="${x0}" y1="${bottom}" x2="${x0 + width}" y2="${bottom}" stroke="#111"/>`;
    rows.forEach((r, i) => {
      const v = value(r),
        x = x0 + i * bw + bw * 0.15,
        w = bw * 0.7;
      if (v === undefined) {
        out += `<text x="${x + w / 2}" y="${bottom - 8}" text-anchor="middle" fill="#666">n/a</text>`;
      } else {
        const h = ((bottom - top) * v) / max;
        out += `<rect x="${x}" y="${bottom - h}" width="${w}" height="${h}" fill="${colours[i % colours.length]}"/>`;
        out += `<text x="${x + w / 2}" y="${bottom - h - 6}" text-anchor="middle">${esc(label(v))}</text>`;
      }
      out += `<text x="${x + w / 2}" y="${bottom + 18}" text-anchor="middle">${esc(r.name)}</text>`;
    });
    return out;
  };
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="13">
<rect width="100%" height="100%" fill="#fff"/>
${panel(
  30,
  'items per second',
  (r) => r.itemsPerSec,
  (v) => Math.round(v).toLocaleString('en-US'),
)}
${panel(
  470,
  'p95 latency (ms)',
  (r) => r.p95,
  (v) => v.toFixed(0),
)}
<text x="${W / 2}" y="${H - 12}" text-anchor="middle" fill="#444">${esc(caption)}</text>
</svg>
`;
}

const ratioText = (/** @type {number | undefined} */ v) =>
  v === undefined ? '–' : `${v.toFixed(2)}×`;

/** A number that may be missing or NaN. @param {number | undefined} v @param {(v: number) => string} f @param {string} [none] */
const maybe = (v, f, none = '–') => (v === undefined || Number.isNaN(v) ? none : f(v));

/** The range of a ratio over rounds, when there are several. @param {number[]} ratios */
function rangeText(ratios) {
  if (ratios.length < 2) return '';
  const { min, max } = range(ratios);
  return ` (${min.toFixed(2)}–${max.toFixed(2)})`;
}

/**
 * The capacity table: per load and sluice variant, medians over rounds beside the references',
 * the sluice/naive ratio (median of the rounds' ratios, with their range), and what a user costs:
 * CPU microseconds of the service's process and of PostgreSQL per user sent (per request at one
 * user a request), sluice's (and against the default variant's, per round) and the naive
 * endpoint's, and the no-op Express endpoint's service cost.
 * @param {import('./capacity.js').CapacityLine[]} lines
 */
export function capacityTable(lines) {
  const head =
    '| load | variant | × naive | users/s | naive users/s | p99 ms | naive p99 ms | service µs/user | service CPU × default | naive service µs/user | no-op service µs/user | DB µs/user | naive DB µs/user | service RSS MiB | row updates | errors (naive) |';
  const out = [head, head.replace(/[^|]+/g, ' --- ')];
  for (const l of lines) {
    const range = rangeText(l.ratios);
    const users =
      l.sentPerSec !== undefined && Math.abs(l.sentPerSec - l.usersPerSec) > 0.5
        ? `${n0(l.usersPerSec)} new of ${n0(l.sentPerSec)} sent`
        : n0(l.usersPerSec);
    out.push(
      `| ${l.load} | ${l.variant} | ${ratioText(l.ratio)}${range} | ${users} | ${n0(l.naive?.usersPerSec)} | ${n1(l.p99)} | ${n1(l.naive?.p99)} | ${maybe(l.serviceUsPerUser, (v) => v.toFixed(1))} | ${maybe(l.cpuVsDefault, (v) => `${v.toFixed(2)}×${rangeText(l.cpuVsDefaultRatios)}`)} | ${maybe(l.naive?.serviceUsPerUser, (v) => v.toFixed(1))} | ${maybe(l.noop?.serviceUsPerUser, (v) => v.toFixed(1))} | ${maybe(l.dbUsPerUser, (v) => v.toFixed(1))}${maybe(l.poolerUsPerUser, (v) => ` (+ ${v.toFixed(1)} pooler)`, '')} | ${maybe(l.naive?.dbUsPerUser, (v) => v.toFixed(1))} | ${n0(l.servicePeakRssMiB)} | ${maybe(l.rowUpdates, (v) => n0(v))} | ${l.errors} (${l.naive?.errors ?? '–'}) |`,
    );
  }
  return out.join('\n');
}

/**
 * The loads measured against another (a load's `against`): per variant, the medians of the
 * rounds' ratios (with their range) of users/s and of the service's and PostgreSQL's CPU a user.
 * Empty when no such pair ran.
 * @param {import('./capacity.js').CapacityLine[]} lines
 */
export function againstTable(lines) {
  const paired = lines.filter((l) => l.against && l.against.usersPerSecRatios.length > 0);
  if (paired.length === 0) return '';
  const head =
    '| load | against | variant | users/s × | service µs/user × | DB µs/user × | rounds |';
  const out = [head, head.replace(/[^|]+/g, ' --- ')];
  for (const l of paired) {
    const a = /** @type {NonNullable<typeof l.against>} */ (l.against);
    out.push(
      `| ${l.load} | ${a.load} | ${l.variant} | ${ratioText(a.usersPerSec)}${rangeText(a.usersPerSecRatios)} | ${ratioText(a.serviceUsPerUser)}${rangeText(a.serviceRatios)} | ${ratioText(a.dbUsPerUser)}${rangeText(a.dbRatios)} | ${a.usersPerSecRatios.length} |`,
    );
  }
  return out.join('\n');
}

/**
 * Every capacity run in the order it ran, for checking a median against what it came from.
 * @param {Array<{ load: string, variant: string, round: number, usersPerSec: number, sentPerSec?: number, k6Items: number, rows?: number, sent?: number, rowUpdates?: number, requestsPerSec: number, p50: number, p95: number, p99: number, errors: number, serviceCpuSeconds: number, servicePeakRssMiB: number, dbCpuSeconds: number, k6CpuSeconds: number }>} runs
 */
export function runsTable(runs) {
  const head =
    '| load | variant | round | users/s | rows | k6 inserted | sent | requests/s | p50 ms | p95 ms | p99 ms | errors | service CPU s | service RSS MiB | DB CPU s | row updates | k6 CPU s |';
  const out = [head, head.replace(/[^|]+/g, ' --- ')];
  for (const r of runs) {
    out.push(
      `| ${r.load} | ${r.variant} | ${r.round + 1} | ${n0(r.usersPerSec)} | ${n0(r.rows)} | ${n0(r.k6Items)} | ${n0(r.sent)} | ${n1(r.requestsPerSec)} | ${n1(r.p50)} | ${n1(r.p95)} | ${n1(r.p99)} | ${r.errors} | ${n1(r.serviceCpuSeconds)} | ${n0(r.servicePeakRssMiB)} | ${n1(r.dbCpuSeconds)} | ${n0(r.rowUpdates)} | ${n1(r.k6CpuSeconds)} |`,
    );
  }
  return out.join('\n');
}

/**
 * Grouped bars of sluice/naive per load (one bar per variant), with the naive endpoint at 1×.
 * Loads without a baseline (replays) have no ratio and are left out.
 * @param {import('./capacity.js').CapacityLine[]} lines
 * @param {string} caption
 */
export function ratioChart(lines, caption) {
  const withRatio = lines.filter((l) => l.ratio !== undefined);
  const loads = [...new Set(withRatio.map((l) => l.load))];
  const variants = [...new Set(withRatio.map((l) => l.variant))];
  const colours = ['#2563eb', '#16a34a', '#d97706', '#9333ea', '#dc2626', '#0891b2'];
  const W = 900,
    H = 400,
    left = 90,
    right = 880,
    top = 60,
    bottom = 320;
  const max = Math.max(2, ...withRatio.map((l) => /** @type {number} */ (l.ratio))) * 1.1;
  const y = (/** @type {number} */ v) => bottom - ((bottom - top) * v) / max;
  const gw = (right - left) / Math.max(loads.length, 1);
  let out = `<text x="${W / 2}" y="28" text-anchor="middle" font-weight="bold">sluice users/s ÷ naive endpoint users/s (median of rounds)</text>`;
  out += `<line x1="${left}" y1="${bottom}" x2="${right}" y2="${bottom}" stroke="#111"/>`;
  for (let t = 0.5; t < max; t += 0.5) {
    if (t !== 1)
      out += `<line x1="${left}" y1="${y(t)}" x2="${right}" y2="${y(t)}" stroke="#e5e7eb"/><text x="${left - 6}" y="${y(t) + 4}" text-anchor="end" fill="#9ca3af">${t}×</text>`;
  }
  out += `<line x1="${left}" y1="${y(1)}" x2="${right}" y2="${y(1)}" stroke="#6b7280" stroke-dasharray="6 4"/>`;
  out += `<text x="${left - 6}" y="${y(1) + 4}" text-anchor="end" fill="#6b7280">naive 1×</text>`;
  loads.forEach((load, g) => {
    const bw = (gw * 0.8) / variants.length;
    variants.forEach((variant, i) => {
      const l = withRatio.find((x) => x.load === load && x.variant === variant);
      if (!l || l.ratio === undefined) return;
      const x = left + g * gw + gw * 0.1 + i * bw;
      out += `<rect x="${x + bw * 0.1}" y="${y(l.ratio)}" width="${bw * 0.8}" height="${bottom - y(l.ratio)}" fill="${colours[i % colours.length]}"/>`;
      out += `<text x="${x + bw / 2}" y="${y(l.ratio) - 6}" text-anchor="middle">${l.ratio.toFixed(2)}×</text>`;
    });
    const [size, vus] = load.split('x');
    out += `<text x="${left + g * gw + gw / 2}" y="${bottom + 20}" text-anchor="middle">${esc(`${size} user${size === '1' ? '' : 's'}/request × ${vus} VUs`)}</text>`;
  });
  variants.forEach((variant, i) => {
    const x = left + i * 170;
    out += `<rect x="${x}" y="${bottom + 36}" width="12" height="12" fill="${colours[i % colours.length]}"/><text x="${x + 18}" y="${bottom + 47}">${esc(variant)}</text>`;
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="13">
<rect width="100%" height="100%" fill="#fff"/>
${out}
<text x="${W / 2}" y="${H - 10}" text-anchor="middle" fill="#444">${esc(caption)}</text>
</svg>
`;
}
