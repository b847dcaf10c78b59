import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import GithubSlugger from 'github-slugger';
import { parse } from 'yaml';
import { startTestApp } from '../support/app.js';
import { createTestDatabase } from '../support/database.js';
import { makeUsers } from '../support/users.js';

// The operator's kit in monitoring/: its rules pass promtool (syntax and their unit tests), every
// metric a rule or a panel names is one the service exports, and every runbook_url leads to a
// heading of docs/operations.md.

const ROOT = new URL('../../', import.meta.url);
const RULES = 'monitoring/prometheus/sluice.rules.yml';
const RULE_TESTS = 'monitoring/prometheus/sluice.rules.test.yml';
const PROMETHEUS_CONFIG = 'monitoring/prometheus/prometheus.yml';
const DASHBOARD = 'monitoring/grafana/sluice-dashboard.json';
const read = (/** @type {string} */ file) => readFileSync(new URL(file, ROOT), 'utf8');
/** Prometheus's own series, not the service's: the scrape's health. */
const PROMETHEUS_OWN = new Set(['up']);
const TOKEN = 'monitoring-test-token-0123456789';

/** @typedef {{ record?: string, alert?: string, expr: string, labels?: Record<string, string>, annotations?: Record<string, string> }} Rule */
/** @returns {Rule[]} */
const rules = () =>
  parse(read(RULES)).groups.flatMap((/** @type {{ rules: Rule[] }} */ g) => g.rules);
/** @returns {string[]} */
const panelQueries = () =>
  JSON.parse(read(DASHBOARD)).panels.flatMap((/** @type {any} */ p) =>
    (p.targets ?? []).map((/** @type {any} */ t) => t.expr),
  );

/**
 * The series names a PromQL expression selects: its identifiers outside quotes that are a
 * metric (`sluice_...`, Prometheus's own) or a recorded name (level:metric:operation).
 * @param {string} expr
 */
export function seriesNamesIn(expr) {
  const unquoted = expr.replace(/"(?:[^"\\]|\\.)*"|`[^`]*`/g, '""');
  const names = [...unquoted.matchAll(/(?<![\w:.$])[a-zA-Z_:][\w:]*/g)].map((m) => m[0]);
  return [
    ...new Set(
      names.filter((n) => n.startsWith('sluice_') || n.includes(':') || PROMETHEUS_OWN.has(n)),
    ),
  ];
}

function promtool(/** @type {string[]} */ args) {
  const run = spawnSync('promtool', args, { cwd: new URL('.', ROOT), encoding: 'utf8' });
  if (run.error) {
    throw new Error(
      `promtool could not be run (${run.error.message}): install it with \`apt-get install -y --no-install-recommends prometheus\` (.ci/run does when it runs as root)`,
    );
  }
  return run;
}

describe('the monitoring kit: rules, their tests, the dashboard', () => {
  test('promtool check rules: the rules file is valid', () => {
    const run = promtool(['check', 'rules', RULES]);
    assert.equal(run.status, 0, run.stdout + run.stderr);
    assert.match(run.stdout, /SUCCESS: \d+ rules found/);
  });

  test('promtool test rules: every alert fires on its sick series and stays silent on the healthy ones', () => {
    const run = promtool(['test', 'rules', RULE_TESTS]);
    assert.equal(run.status, 0, run.stdout + run.stderr);
    const tested = new Set([...read(RULE_TESTS).matchAll(/alertname: (\w+)/g)].map((m) => m[1]));
    const alerts = new Set(rules().flatMap((r) => (r.alert ? [r.alert] : [])));
    assert.deepEqual(
      [...alerts].filter((a) => !tested.has(a)),
      [],
      'every alert has a unit test',
    );
  });

  test('promtool check config: the example prometheus.yml is valid, scrapes job sluice and loads the rules', () => {
    const run = promtool(['check', 'config', PROMETHEUS_CONFIG]);
    assert.equal(run.status, 0, run.stdout + run.stderr);
    assert.match(run.stdout, /SUCCESS: 1 rule files found/);
    const config = parse(read(PROMETHEUS_CONFIG));
    assert.deepEqual(config.rule_files, [RULES.split('/').at(-1)]);
    // SluiceDown reads up{job="sluice"}: the job must be named so.
    const [job] = config.scrape_configs;
    assert.equal(job.job_name, 'sluice');
    assert.ok(rules().some((r) => r.alert && r.expr.includes(`job="${job.job_name}"`)));
    assert.equal(job.metrics_path, '/metrics');
  });

  test('the expressions are read for their series names', () => {
    assert.deepEqual(
      seriesNamesIn(
        'sum by (le) (rate(sluice_x_bucket{route="/users",le="1"}[5m])) / job:sluice_y:ratio_rate5m{job=~"$job"} > up',
      ),
      ['sluice_x_bucket', 'job:sluice_y:ratio_rate5m', 'up'],
    );
    assert.deepEqual(
      seriesNamesIn('histogram_quantile(0.99, x[$__rate_interval:1m]) and on (job) y offset 30m'),
      [],
    );
  });

  test('every alert has a severity, a summary and a runbook_url to a heading of docs/operations.md', () => {
    const slugger = new GithubSlugger();
    const anchors = new Set(
      [...read('docs/operations.md').matchAll(/^#+ (.+)$/gm)].map((m) => slugger.slug(m[1])),
    );
    for (const rule of rules().filter((r) => r.alert)) {
      assert.match(rule.labels?.severity ?? '', /^(critical|warning)$/, rule.alert);
      assert.ok(rule.annotations?.summary, `${rule.alert} has a summary`);
      const [file, anchor] = (rule.annotations?.runbook_url ?? '').split('#');
      assert.equal(file, 'docs/operations.md', `${rule.alert}'s runbook_url`);
      assert.ok(
        anchors.has(anchor),
        `${rule.alert}'s runbook_url names #${anchor}, which docs/operations.md has no heading for`,
      );
    }
  });

  test('the dashboard: schemaVersion 36 or later, its Prometheus data source a variable every panel uses', () => {
    const dashboard = JSON.parse(read(DASHBOARD));
    assert.ok(dashboard.schemaVersion >= 36);
    const variable = dashboard.templating.list.find(
      (/** @type {any} */ v) => v.type === 'datasource',
    );
    assert.equal(variable?.query, 'prometheus');
    for (const panel of dashboard.panels.filter((/** @type {any} */ p) => p.type !== 'row')) {
      assert.equal(panel.datasource?.uid, `\${${variable.name}}`, panel.title);
      assert.ok(panel.targets.length > 0, panel.title);
      for (const target of panel.targets)
        assert.equal(target.datasource?.uid, `\${${variable.name}}`, panel.title);
    }
  });

  describe('against a running service', () => {
    /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
    /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
    /** @type {Set<string>} */ let exported;
    before(async () => {
      db = await createTestDatabase();
      app = await startTestApp({
        databaseUrl: db.url,
        env: { INGEST_TOKENS: JSON.stringify({ monitoring: TOKEN }) },
      });
      // An array, a stream and a refusal, and each route answered, so every labelled family has its series.
      assert.equal((await app.postUsers(makeUsers(2), { token: TOKEN })).status, 201);
      assert.equal(
        (
          await app.postUsers(
            makeUsers(2)
              .map((u) => JSON.stringify(u))
              .join('\n'),
            { token: TOKEN, contentType: 'application/x-ndjson' },
          )
        ).status,
        201,
      );
      assert.equal((await app.postUsers(makeUsers(1), { token: 'not-a-token' })).status, 401);
      assert.equal((await fetch(`${app.baseUrl}/readyz`)).status, 200);
      const text = await (
        await fetch(`${app.baseUrl}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })
      ).text();
      exported = new Set([...text.matchAll(/^([a-zA-Z_:][\w:]*)(?:\{| )/gm)].map((m) => m[1]));
    });
    after(async () => {
      await app?.close();
      await db?.drop();
    });

    const recorded = () => new Set(rules().flatMap((r) => (r.record ? [r.record] : [])));

    test("every series a rule names is exported by /metrics, recorded by a rule, or Prometheus's own", () => {
      for (const rule of rules()) {
        for (const name of seriesNamesIn(rule.expr)) {
          const known = name.includes(':')
            ? recorded().has(name)
            : exported.has(name) || PROMETHEUS_OWN.has(name);
          assert.ok(
            known,
            `${rule.alert ?? rule.record} names ${name}, which ${name.includes(':') ? 'no rule records' : '/metrics does not export'}`,
          );
        }
      }
    });

    test("every series a dashboard panel names is exported by /metrics, recorded by a rule, or Prometheus's own", () => {
      for (const expr of panelQueries()) {
        for (const name of seriesNamesIn(expr)) {
          const known = name.includes(':')
            ? recorded().has(name)
            : exported.has(name) || PROMETHEUS_OWN.has(name);
          assert.ok(
            known,
            `the dashboard's query ${expr} names ${name}, which ${name.includes(':') ? 'no rule records' : '/metrics does not export'}`,
          );
        }
      }
    });
  });
});
