/**
 * One sample of the soak: the service's state at `t` and the traffic of the window that ends there.
 * @typedef {object} Sample
 * @property {number} t          seconds since the traffic started
 * @property {boolean} pgDown    PostgreSQL was down during (part of) the window
 * @property {number} rssMiB     the service's resident memory (all its processes)
 * @property {number} cpuPercent the service's CPU over the window, in % of one core
 * @property {number} [heapMiB]  V8 heap used, from /metrics
 * @property {number} [eldP99Ms] event-loop delay p99 over the window, from /metrics, beyond the sampling tick
 * @property {number} requests   HTTP attempts answered (or failed) in the window
 * @property {number} reqPerSec  the same per second
 * @property {number} usersPerSec  new users written per second
 * @property {number} [p99Ms] @property {number} [p99SingleMs] @property {number} [p99BatchMs]
 * @property {number} ok @property {number} invalid @property {number} unavailable @property {number} other @property {number} network
 */

const f0 = (/** @type {number | undefined} */ v) =>
  v === undefined ? '–' : Math.round(v).toLocaleString('en-US');
const f1 = (/** @type {number | undefined} */ v) => (v === undefined ? '–' : v.toFixed(1));

/** @param {Sample[]} samples */
export function soakTable(samples) {
  const head =
    '| t | PG | RSS MiB | heap MiB | CPU % | loop delay p99 ms | req/s | users/s | p99 ms | p99 one ms | p99 batch ms | 2xx | 400 | 503 | other | net err |';
  const lines = [head, head.replace(/[^|]+/g, ' --- ')];
  for (const s of samples) {
    const t = `${Math.floor(s.t / 60)}:${String(Math.round(s.t % 60)).padStart(2, '0')}`;
    lines.push(
      `| ${t} | ${s.pgDown ? 'down' : 'up'} | ${f1(s.rssMiB)} | ${f1(s.heapMiB)} | ${f0(s.cpuPercent)} | ${f1(s.eldP99Ms)} | ${f1(s.reqPerSec)} | ${f0(s.usersPerSec)} | ${f0(s.p99Ms)} | ${f0(s.p99SingleMs)} | ${f0(s.p99BatchMs)} | ${s.ok} | ${s.invalid} | ${s.unavailable} | ${s.other} | ${s.network} |`,
    );
  }
  return lines.join('\n');
}

/** @param {number[]} xs */
const mean = (xs) => xs.reduce((a, b) => a + b, 0) / xs.length;

/**
 * How much the service's RSS grew between the 20% mark of the run (minute 2 of 10: the warm-up is
 * over) and its end: the means of the samples around each point, and the least-squares slope of
 * every sample in between, which one GC cycle cannot fake.
 * @param {Sample[]} samples @param {number} durationS
 */
export function rssGrowth(samples, durationS) {
  const fromT = durationS * 0.2;
  const near = (/** @type {number} */ lo, /** @type {number} */ hi) =>
    samples.filter((s) => s.t >= lo && s.t <= hi).map((s) => s.rssMiB);
  const start = near(fromT - durationS * 0.05, fromT + durationS * 0.05);
  const end = near(durationS * 0.9, durationS + 1);
  const span = samples.filter((s) => s.t >= fromT);
  if (!start.length || !end.length || span.length < 2) return undefined;
  const mt = mean(span.map((s) => s.t)),
    mr = mean(span.map((s) => s.rssMiB));
  const slope =
    span.reduce((a, s) => a + (s.t - mt) * (s.rssMiB - mr), 0) /
    span.reduce((a, s) => a + (s.t - mt) ** 2, 0);
  const fromMiB = mean(start),
    toMiB = mean(end);
  return {
    fromMinute: fromT / 60,
    fromMiB,
    toMinute: durationS / 60,
    toMiB,
    growthMiB: toMiB - fromMiB,
    slopeMiBPerMin: slope * 60,
  };
}

/** @param {string} s */
const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');

/** A round axis maximum at or above v. @param {number} v */
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((m) => m >= v) ?? 10 * p;
}

/**
 * Four panels over time sharing the x axis: memory, event-loop delay, request p99, throughput; the
 * time PostgreSQL was down shaded across all of them.
 * @param {Sample[]} samples
 * @param {{ durationS: number, outage?: { fromS: number, toS: number }, caption: string }} options
 */
export function soakChart(samples, { durationS, outage, caption }) {
  const W = 900,
    left = 70,
    right = 160,
    panelH = 130,
    gap = 45,
    top = 40;
  const plotW = W - left - right;
  /** @type {{ title: string, unit: string, series: { label: string, colour: string, value: (s: Sample) => number | undefined }[] }[]} */
  const panels = [
    {
      title: 'service memory',
      unit: 'MiB',
      series: [
        { label: 'RSS', colour: '#2563eb', value: (s) => s.rssMiB },
        { label: 'heap used', colour: '#16a34a', value: (s) => s.heapMiB },
      ],
    },
    {
      title: 'event-loop delay p99, beyond the 10 ms tick',
      unit: 'ms',
      series: [{ label: 'loop delay p99', colour: '#9333ea', value: (s) => s.eldP99Ms }],
    },
    {
      title: 'request latency p99',
      unit: 'ms',
      series: [
        { label: 'one user', colour: '#d97706', value: (s) => s.p99SingleMs },
        { label: '1000 users', colour: '#dc2626', value: (s) => s.p99BatchMs },
      ],
    },
    {
      title: 'throughput',
      unit: 'per s',
      series: [
        { label: 'requests/s', colour: '#0891b2', value: (s) => s.reqPerSec },
        { label: 'users/s ÷ 10', colour: '#6b7280', value: (s) => s.usersPerSec / 10 },
      ],
    },
  ];
  const H = top + panels.length * (panelH + gap) + 30;
  const x = (/** @type {number} */ t) => left + (plotW * t) / durationS;
  let out = '';
  panels.forEach((p, i) => {
    const y0 = top + i * (panelH + gap),
      yBottom = y0 + panelH;
    const max = niceMax(
      Math.max(0, ...samples.flatMap((s) => p.series.map((se) => se.value(s) ?? 0))),
    );
    const y = (/** @type {number} */ v) => yBottom - (panelH * v) / max;
    out += `<text x="${left}" y="${y0 - 8}" font-weight="bold">${esc(`${p.title} (${p.unit})`)}</text>`;
    if (outage)
      out += `<rect x="${x(outage.fromS)}" y="${y0}" width="${Math.max(1, x(outage.toS) - x(outage.fromS))}" height="${panelH}" fill="#fde2e2"/>`;
    for (const frac of [0, 0.5, 1]) {
      out += `<line x1="${left}" y1="${y(max * frac)}" x2="${left + plotW}" y2="${y(max * frac)}" stroke="${frac ? '#e5e7eb' : '#111'}"/>`;
      out += `<text x="${left - 6}" y="${y(max * frac) + 4}" text-anchor="end" fill="#444">${esc(String(+(max * frac).toPrecision(3)))}</text>`;
    }
    p.series.forEach((se, j) => {
      const points = samples
        .filter((s) => se.value(s) !== undefined)
        .map((s) => `${x(s.t).toFixed(1)},${y(/** @type {number} */ (se.value(s))).toFixed(1)}`);
      if (points.length)
        out += `<polyline fill="none" stroke="${se.colour}" stroke-width="1.8" points="${points.join(' ')}"/>`;
      out += `<rect x="${left + plotW + 15}" y="${y0 + 10 + j * 20}" width="12" height="3" fill="${se.colour}"/><text x="${left + plotW + 32}" y="${y0 + 15 + j * 20}">${esc(se.label)}</text>`;
    });
  });
  const axisY = top + panels.length * (panelH + gap) - gap + 18;
  const stepMin = durationS <= 180 ? 0.5 : durationS > 600 ? 2 : 1;
  for (let m = 0; m * 60 <= durationS + 1; m += stepMin)
    out += `<text x="${x(m * 60)}" y="${axisY}" text-anchor="middle" fill="#444">${m} min</text>`;
  if (outage)
    out += `<text x="${left + plotW + 15}" y="${top + panelH - 5}" fill="#b91c1c">PostgreSQL down</text>`;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="#fff"/>
${out}
<text x="${W / 2}" y="${H - 8}" text-anchor="middle" fill="#444">${esc(caption)}</text>
</svg>
`;
}
