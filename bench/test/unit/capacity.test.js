import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  LOADS,
  VARIANTS,
  baseVariant,
  credentialsFor,
  planRuns,
  summarise,
} from '../../lib/capacity.js';
import { startAuthentication } from '../../../service/src/auth/start-auth.js';
import { loadConfig } from '../../../service/src/config.js';
import { againstTable, capacityTable, ratioChart } from '../../lib/report.js';

const load = (/** @type {string} */ id) =>
  /** @type {import('../../lib/capacity.js').Load} */ (LOADS.find((l) => l.id === id));

describe('capacity plan and ratios', () => {
  test('each round of variants sits between two naive runs, after the no-op reference; replay loads have no references and only their variants', () => {
    const plan = planRuns([load('1x100'), load('1000x8-replay')], ['default', 'unnest', 'copy'], 2);
    assert.deepEqual(
      plan.map((p) => `${p.load.id}:${p.variant}:${p.round}`),
      [
        '1x100:naive:0',
        '1x100:noop:0',
        '1x100:default:0',
        '1x100:unnest:0',
        '1x100:copy:0',
        '1x100:naive:1',
        '1x100:noop:1',
        '1x100:default:1',
        '1x100:unnest:1',
        '1x100:copy:1',
        '1x100:naive:2',
        '1000x8-replay:default:0',
        '1000x8-replay:copy:0',
        '1000x8-replay:default:1',
        '1000x8-replay:copy:1',
      ],
    );
  });

  test('--compare: another checkout runs as <variant>@compare beside each variant, where the load takes that variant', () => {
    const plan = planRuns(
      [load('1000x8'), load('1000x8-representation')],
      ['default', 'default@compare', 'tracing', 'tracing@compare'],
      1,
    );
    assert.deepEqual(
      plan.map((p) => `${p.load.id}:${p.variant}`),
      [
        '1000x8:naive',
        '1000x8:noop',
        '1000x8:default',
        '1000x8:default@compare',
        '1000x8:tracing',
        '1000x8:tracing@compare',
        '1000x8:naive',
        '1000x8-representation:default',
        '1000x8-representation:default@compare',
      ],
    );
    assert.equal(baseVariant('tracing@compare'), 'tracing');
    assert.equal(baseVariant('default'), 'default');
  });

  test('loads without a baseline run round by round, their order reversed every other round, so a load measured against another runs beside it', () => {
    const plan = planRuns(
      [load('1000x8-merge'), load('1000x8-merge-ordered'), load('1x100')],
      ['default', 'copy'],
      3,
    );
    assert.deepEqual(
      plan
        .filter((p) => p.load.baseline === false)
        .map((p) => `${p.load.id}:${p.variant}:${p.round}`),
      [
        '1000x8-merge:default:0',
        '1000x8-merge:copy:0',
        '1000x8-merge-ordered:default:0',
        '1000x8-merge-ordered:copy:0',
        '1000x8-merge-ordered:default:1',
        '1000x8-merge-ordered:copy:1',
        '1000x8-merge:default:1',
        '1000x8-merge:copy:1',
        '1000x8-merge:default:2',
        '1000x8-merge:copy:2',
        '1000x8-merge-ordered:default:2',
        '1000x8-merge-ordered:copy:2',
      ],
    );
    assert.equal(plan[0].load.id, '1x100', 'the loads with a baseline keep their blocks, first');
  });

  test("a load measured against another: users/s and CPU a user over the other load's of the same round and variant, medians of the rounds", () => {
    const base = { p99: 10, errors: 0, servicePeakRssMiB: 100, sent: 1_000_000 };
    const runs = [
      {
        ...base,
        load: '1000x8-merge',
        variant: 'default',
        round: 0,
        usersPerSec: 100,
        serviceCpuSeconds: 10,
        dbCpuSeconds: 20,
      },
      {
        ...base,
        load: '1000x8-merge-ordered',
        variant: 'default',
        round: 0,
        usersPerSec: 90,
        serviceCpuSeconds: 11,
        dbCpuSeconds: 20,
      },
      {
        ...base,
        load: '1000x8-merge-ordered',
        variant: 'default',
        round: 1,
        usersPerSec: 40,
        serviceCpuSeconds: 12,
        dbCpuSeconds: 30,
      },
      {
        ...base,
        load: '1000x8-merge',
        variant: 'default',
        round: 1,
        usersPerSec: 50,
        serviceCpuSeconds: 10,
        dbCpuSeconds: 20,
      },
      {
        ...base,
        load: '1000x8-merge-ordered',
        variant: 'default',
        round: 2,
        usersPerSec: 70,
        serviceCpuSeconds: 10,
        dbCpuSeconds: 20,
      },
    ];
    const lines = summarise(runs);
    const ordered = /** @type {import('../../lib/capacity.js').CapacityLine} */ (
      lines.find((l) => l.load === '1000x8-merge-ordered')
    );
    assert.equal(ordered.against?.load, '1000x8-merge');
    assert.deepEqual(
      ordered.against?.usersPerSecRatios,
      [0.9, 0.8],
      'a round without its pair counts for nothing',
    );
    assert.ok(Math.abs(/** @type {number} */ (ordered.against?.usersPerSec) - 0.85) < 1e-9);
    assert.deepEqual(ordered.against?.dbRatios, [1, 1.5]);
    assert.equal(lines.find((l) => l.load === '1000x8-merge')?.against, undefined);
    assert.match(
      againstTable(lines),
      /\| 1000x8-merge-ordered \| 1000x8-merge \| default \| 0\.85× \(0\.80–0\.90\) \| 1\.15× \(1\.10–1\.20\) \| 1\.25× \(1\.00–1\.50\) \| 2 \|/,
    );
    assert.equal(againstTable(lines.filter((l) => l.load === '1000x8-merge')), '');
  });

  test('a ratio divides by the mean of the naive runs either side; the median of rounds is quoted', () => {
    const base = {
      p99: 10,
      errors: 0,
      serviceCpuSeconds: 1,
      servicePeakRssMiB: 100,
      dbCpuSeconds: 1,
    };
    const runs = [
      { ...base, load: '1x100', variant: 'naive', round: 0, usersPerSec: 1000 },
      { ...base, load: '1x100', variant: 'default', round: 0, usersPerSec: 1500 },
      { ...base, load: '1x100', variant: 'naive', round: 1, usersPerSec: 2000 },
      { ...base, load: '1x100', variant: 'default', round: 1, usersPerSec: 4000 },
      { ...base, load: '1x100', variant: 'naive', round: 2, usersPerSec: 2000 },
      { ...base, load: '1x100', variant: 'default', round: 2, usersPerSec: 3000 },
      { ...base, load: '1x100', variant: 'naive', round: 3, usersPerSec: 1000 },
    ];
    const [line] = summarise(runs);
    assert.deepEqual(line.ratios, [1, 2, 2]);
    assert.equal(line.ratio, 2);
    assert.equal(line.usersPerSec, 3000);
    assert.equal(line.naive?.usersPerSec, 1500);
    assert.match(
      capacityTable([line]),
      /\| 1x100 \| default \| 2\.00× \(1\.00–2\.00\) \| 3,000 \| 1,500 \|/,
    );
    assert.match(ratioChart([line], 'caption'), /2\.00×/);
  });

  test('a load without naive runs has no ratio', () => {
    const [line] = summarise([
      {
        load: '1000x8-replay',
        variant: 'copy',
        round: 0,
        usersPerSec: 5,
        sentPerSec: 10,
        p99: 1,
        errors: 0,
        serviceCpuSeconds: 1,
        servicePeakRssMiB: 1,
        dbCpuSeconds: 1,
      },
    ]);
    assert.equal(line.ratio, undefined);
    assert.match(capacityTable([line]), /5 new of 10 sent/);
  });

  test('cost per user: CPU microseconds per user sent, sluice beside the naive and no-op references', () => {
    const base = { p99: 10, errors: 0, servicePeakRssMiB: 100 };
    const runs = [
      {
        ...base,
        load: '1000x8',
        variant: 'naive',
        round: 0,
        usersPerSec: 1000,
        sent: 100_000,
        serviceCpuSeconds: 0.24,
        dbCpuSeconds: 0.81,
      },
      {
        ...base,
        load: '1000x8',
        variant: 'noop',
        round: 0,
        usersPerSec: 5000,
        sent: 200_000,
        serviceCpuSeconds: 0.2,
        dbCpuSeconds: 0,
      },
      {
        ...base,
        load: '1000x8',
        variant: 'default',
        round: 0,
        usersPerSec: 1200,
        sent: 100_000,
        rowUpdates: 0,
        serviceCpuSeconds: 0.26,
        dbCpuSeconds: 0.5,
      },
      {
        ...base,
        load: '1000x8',
        variant: 'naive',
        round: 1,
        usersPerSec: 1000,
        sent: 100_000,
        serviceCpuSeconds: 0.24,
        dbCpuSeconds: 0.81,
      },
    ];
    const [line] = summarise(runs);
    assert.equal(line.variant, 'default', 'the references are not variants of their own');
    assert.ok(
      Math.abs(line.serviceUsPerUser - 2.6) < 1e-9 && Math.abs(line.dbUsPerUser - 5) < 1e-9,
    );
    assert.ok(Math.abs(/** @type {number} */ (line.naive?.dbUsPerUser) - 8.1) < 1e-9);
    assert.ok(Math.abs(/** @type {number} */ (line.noop?.serviceUsPerUser) - 1) < 1e-9);
    assert.match(
      capacityTable([line]),
      /\| 2\.6 \| – \| 2\.4 \| 1\.0 \| 5\.0 \| 8\.1 \| 100 \| 0 \|/,
    );
  });

  test("through a pooler: the pooler's CPU a user beside PostgreSQL's", () => {
    const base = {
      load: '1x100',
      p99: 10,
      errors: 0,
      servicePeakRssMiB: 100,
      usersPerSec: 1000,
      sent: 10_000,
      serviceCpuSeconds: 1,
      dbCpuSeconds: 0.05,
    };
    const runs = [
      { ...base, variant: 'default', round: 0 },
      { ...base, variant: 'pgbouncer', round: 0, poolerCpuSeconds: 0.012 },
      { ...base, variant: 'pgbouncer', round: 1, poolerCpuSeconds: 0.014 },
    ];
    const lines = Object.fromEntries(summarise(runs).map((l) => [l.variant, l]));
    assert.equal(lines.default.poolerUsPerUser, undefined);
    assert.ok(Math.abs(/** @type {number} */ (lines.pgbouncer.poolerUsPerUser) - 1.3) < 1e-9);
    const table = capacityTable(Object.values(lines));
    assert.match(table, /\| default \|.*\| 5\.0 \| – \|/);
    assert.match(table, /\| pgbouncer \|.*\| 5\.0 \(\+ 1\.3 pooler\) \| – \|/);
  });

  test("a variant's service CPU a user against the default's of the same round; a --compare checkout against its own default", () => {
    const base = {
      load: '1x100',
      p99: 10,
      errors: 0,
      servicePeakRssMiB: 100,
      dbCpuSeconds: 1,
      usersPerSec: 1000,
      sent: 10_000,
    };
    const runs = [
      { ...base, variant: 'default', round: 0, serviceCpuSeconds: 1 },
      { ...base, variant: 'tracing', round: 0, serviceCpuSeconds: 1.2 },
      { ...base, variant: 'default@compare', round: 0, serviceCpuSeconds: 2 },
      { ...base, variant: 'tracing@compare', round: 0, serviceCpuSeconds: 3 },
      // The machine slowed down: both dearer, the ratio of the round the same.
      { ...base, variant: 'default', round: 1, serviceCpuSeconds: 2 },
      { ...base, variant: 'tracing', round: 1, serviceCpuSeconds: 2.8 },
      { ...base, variant: 'default@compare', round: 1, serviceCpuSeconds: 2 },
      { ...base, variant: 'tracing@compare', round: 1, serviceCpuSeconds: 3 },
      // A round whose default run is missing gives no ratio.
      { ...base, variant: 'tracing', round: 2, serviceCpuSeconds: 9 },
    ];
    const lines = Object.fromEntries(summarise(runs).map((l) => [l.variant, l]));
    assert.equal(lines.default.cpuVsDefault, undefined);
    assert.deepEqual(lines.default.cpuVsDefaultRatios, []);
    assert.deepEqual(
      lines.tracing.cpuVsDefaultRatios.map((r) => Math.round(r * 100) / 100),
      [1.2, 1.4],
    );
    assert.ok(Math.abs(/** @type {number} */ (lines.tracing.cpuVsDefault) - 1.3) < 1e-9);
    assert.deepEqual(lines['tracing@compare'].cpuVsDefaultRatios, [1.5, 1.5]);
    const table = capacityTable(Object.values(lines));
    assert.match(table, /\| 1x100 \| tracing \| .* \| 1\.30× \(1\.20–1\.40\) \|/);
    assert.match(table, /\| 1x100 \| default \| .* \| – \|/);
  });

  test('the credentials variants: what k6 sends is what each service accepts; the others send nothing', async () => {
    const logger = /** @type {any} */ ({ info() {}, warn() {} });
    for (const variant of ['token', 'tokens', 'jwt']) {
      const { TOKEN } = await credentialsFor(variant);
      const auth = await startAuthentication(loadConfig(VARIANTS[variant]).auth, { logger });
      const client = auth.tokens?.current.match(TOKEN) ?? (await auth.verifyJwt?.(TOKEN))?.client;
      assert.equal(client, variant === 'token' ? 'default' : 'bench', variant);
      auth.close();
    }
    assert.equal(
      JSON.parse(VARIANTS.tokens.INGEST_TOKENS) &&
        Object.keys(JSON.parse(VARIANTS.tokens.INGEST_TOKENS)).length,
      8,
    );
    assert.deepEqual(await credentialsFor('default'), {});
  });
});
