import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { markdownTable, runsTable, svgChart } from '../../lib/report.js';

/** @type {import('../../lib/report.js').Row[]} */
const ROWS = [
  {
    name: 'one',
    itemsPerSec: 1500,
    requestsPerSec: 1504.1,
    p50: 362.7,
    p95: 2018.9,
    p99: 2584,
    errors: 75,
    serviceCpuSeconds: 8.7,
    dbCpuSeconds: 4.3,
    servicePeakRssMiB: 299.4,
    k6CpuSeconds: 10.6,
  },
  {
    name: 'batch',
    itemsPerSec: 82_500,
    requestsPerSec: 82.7,
    p50: 89.4,
    p95: 241.7,
    p99: 328.3,
    errors: 0,
    serviceCpuSeconds: 2.6,
    dbCpuSeconds: 11.7,
    servicePeakRssMiB: 172,
    k6CpuSeconds: 2,
  },
  { name: 'COPY ceiling', itemsPerSec: 165_000 },
];

/** @param {string} table @returns {string[][]} the cells of each line after the header's separator */
const cells = (table) =>
  table
    .split('\n')
    .slice(2)
    .map((line) =>
      line
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim()),
    );

describe('the results table (unit)', () => {
  test('one line per run: figures rounded, × one and % of the COPY ceiling worked out, – where a figure is missing', () => {
    const table = markdownTable(ROWS, 165_000);
    assert.deepEqual(cells(table), [
      [
        'one',
        '1,500',
        '1504.1',
        '362.7',
        '2018.9',
        '2584.0',
        '75',
        '8.7',
        '4.3',
        '299',
        '10.6',
        '1.0',
        '0.9',
      ],
      [
        'batch',
        '82,500',
        '82.7',
        '89.4',
        '241.7',
        '328.3',
        '0',
        '2.6',
        '11.7',
        '172',
        '2.0',
        '55.0',
        '50.0',
      ],
      ['COPY ceiling', '165,000', '–', '–', '–', '–', '–', '–', '–', '–', '–', '110.0', '100.0'],
    ]);
    assert.match(
      table.split('\n')[1],
      /^\| :-+ \| -+: \|/,
      'names left-aligned, figures right-aligned',
    );
  });

  test('without a "one" run there is no × one column to work out', () => {
    assert.deepEqual(cells(markdownTable([ROWS[1]], 165_000))[0].at(-2), '–');
  });
});

describe('the results chart (unit)', () => {
  test('one bar per run in each panel, the tallest for the largest value, n/a where a value is missing', () => {
    const svg = svgChart(ROWS, 'caption <with> & marks');
    const heights = [
      ...svg.matchAll(/<rect x="[^"]+" y="[^"]+" width="[^"]+" height="([^"]+)"/g),
    ].map((m) => Number(m[1]));
    // items/s: three bars; p95: two bars and an n/a for the ceiling.
    assert.equal(heights.length, 5);
    assert.equal(
      Math.max(...heights.slice(0, 3)),
      heights[2],
      'the ceiling is the tallest items/s bar',
    );
    assert.ok(heights[3] > heights[4], 'one has the worse p95');
    assert.equal((svg.match(/>n\/a</g) ?? []).length, 1);
    assert.ok(svg.includes('caption &lt;with> &amp; marks'), 'the caption is escaped');
  });
});

describe('the capacity runs table (unit)', () => {
  test('every run in the order it ran, rounds counted from 1', () => {
    const run = {
      load: '1000x8',
      variant: 'copy',
      round: 0,
      usersPerSec: 80_262.4,
      sentPerSec: 80_262.4,
      k6Items: 500_000,
      rows: 500_000,
      sent: 500_000,
      rowUpdates: 0,
      requestsPerSec: 80.3,
      p50: 113.2,
      p95: 465.6,
      p99: 520.8,
      errors: 0,
      serviceCpuSeconds: 3.6,
      servicePeakRssMiB: 185,
      dbCpuSeconds: 11.9,
      k6CpuSeconds: 2.1,
    };
    assert.deepEqual(cells(runsTable([run, { ...run, round: 1, errors: 2 }])), [
      [
        '1000x8',
        'copy',
        '1',
        '80,262',
        '500,000',
        '500,000',
        '500,000',
        '80.3',
        '113.2',
        '465.6',
        '520.8',
        '0',
        '3.6',
        '185',
        '11.9',
        '0',
        '2.1',
      ],
      [
        '1000x8',
        'copy',
        '2',
        '80,262',
        '500,000',
        '500,000',
        '500,000',
        '80.3',
        '113.2',
        '465.6',
        '520.8',
        '2',
        '3.6',
        '185',
        '11.9',
        '0',
        '2.1',
      ],
    ]);
  });
});
