import { markdownTable as gfmTable } from 'markdown-table';

/**
 * @typedef {object} Row
 * @property {string} name
 * @property {number} itemsPerSec
 * @property {number} [requestsPerSec]
 * @property {number} [p50] @property {number} [p95] @property {number} [p99]  milliseconds
 * @property {number} [errors]
 * @property {number} [serviceCpuSeconds] @property {number} [dbCpuSeconds] @property {number} [servicePeakRssMiB] @property {number} [k6CpuSeconds]
 */

const n0 = (/** @type {number | undefined} */ v) => (v === undefined ? '–' : Math.round(v).toLocaleString('en-US'));
const n1 = (/** @type {number | undefined} */ v) => (v === undefined ? '–' : v.toFixed(1));

/**
 * The results table: one row per measured run, with the batch/one ratio and each row's share of
 * the COPY ceiling.
 * @param {Row[]} rows
 * @param {number} ceiling  items/s of COPY
 */
export function markdownTable(rows, ceiling) {
  const one = rows.find((r) => r.name === 'one');
  const head = ['test', 'items/s', 'requests/s', 'p50 ms', 'p95 ms', 'p99 ms', 'errors', 'service CPU s', 'DB CPU s', 'service peak RSS MiB', 'k6 CPU s', '× one', '% of COPY'];
  const body = rows.map((r) => [
    r.name, n0(r.itemsPerSec), n1(r.requestsPerSec), n1(r.p50), n1(r.p95), n1(r.p99), String(r.errors ?? '–'), n1(r.serviceCpuSeconds),
    n1(r.dbCpuSeconds), n0(r.servicePeakRssMiB), n1(r.k6CpuSeconds), one ? n1(r.itemsPerSec / one.itemsPerSec) : '–', n1((r.itemsPerSec / ceiling) * 100),
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
  const W = 900, H = 360, top = 50, bottom = 300, colours = ['#6b7280', '#2563eb', '#16a34a', '#d97706', '#9333ea', '#dc2626'];
  /** @param {number} x0 @param {string} title @param {(r: Row) => number | undefined} value @param {(v: number) => string} label */
  const panel = (x0, title, value, label) => {
    const width = 400, max = Math.max(...rows.map((r) => value(r) ?? 0), 1), bw = width / rows.length;
    let out = `<text x="${x0 + width / 2}" y="${top - 20}" text-anchor="middle" font-weight="bold">${esc(title)}</text>`;
    out += `<line x1="${x0}" y1="${bottom}" x2="${x0 + width}" y2="${bottom}" stroke="#111"/>`;
    rows.forEach((r, i) => {
      const v = value(r), x = x0 + i * bw + bw * 0.15, w = bw * 0.7;
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
${panel(30, 'items per second', (r) => r.itemsPerSec, (v) => Math.round(v).toLocaleString('en-US'))}
${panel(470, 'p95 latency (ms)', (r) => r.p95, (v) => v.toFixed(0))}
<text x="${W / 2}" y="${H - 12}" text-anchor="middle" fill="#444">${esc(caption)}</text>
</svg>
`;
}
