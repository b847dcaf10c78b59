import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { findK6, runK6 } from '../../../bench/lib/k6-binary.js';
import { startTestApp } from '../../../test/support/app.js';
import { createTestDatabase } from '../../../test/support/database.js';

const K6_DIR = path.dirname(path.dirname(path.dirname(fileURLToPath(import.meta.url))));
const TOKEN = 'smoke-test-token-0123456789';

describe('k6 smoke runs (a few seconds, 3 VUs)', () => {
  /** @type {Awaited<ReturnType<typeof createTestDatabase>>} */ let db;
  /** @type {Awaited<ReturnType<typeof startTestApp>>} */ let app;
  /** @type {string} */ let k6;
  /** @type {string} */ let outDir;
  before(async () => {
    // No silent skip: without k6 (and without Go to build it) this fails, saying how to get it.
    k6 = await findK6();
    db = await createTestDatabase();
    app = await startTestApp({
      databaseUrl: db.url,
      env: { INGEST_TOKEN: TOKEN, LOG_LEVEL: 'warn' },
    });
    outDir = await mkdtemp(path.join(os.tmpdir(), 'sluice-k6-'));
  });
  after(async () => {
    await app?.close();
    await db?.drop();
    if (outDir) await rm(outDir, { recursive: true, force: true });
  });

  for (const script of ['stress-test-one.js', 'stress-test-batch.js']) {
    test(`${script}: exits 0, writes its JSON summary, and inserted_items equals the new rows`, async () => {
      const before = await db.countUsers();
      const summaryFile = path.join(outDir, `${script}.json`);
      const { code } = await runK6(
        k6,
        path.join(K6_DIR, script),
        {
          BASE_URL: app.baseUrl,
          TOKEN,
          VUS: '3',
          DURATION: '2s',
          SUMMARY_FILE: summaryFile,
        },
        { quiet: true },
      );
      assert.equal(code, 0);
      const summary = JSON.parse(await readFile(summaryFile, 'utf8'));
      const inserted = summary.metrics.inserted_items.values.count;
      assert.ok(inserted > 0);
      assert.equal(await db.countUsers(), before + inserted);
      assert.equal(summary.metrics.successful_requests.values.rate, 1);
    });
  }

  test('REPLAY=1 (capacity mode): every other request resends stored users; k6 passes and counts only the new rows', async () => {
    const before = await db.countUsers();
    const summaryFile = path.join(outDir, 'replay.json');
    const { code } = await runK6(
      k6,
      path.join(K6_DIR, 'stress-test-batch.js'),
      {
        BASE_URL: app.baseUrl,
        TOKEN,
        VUS: '2',
        DURATION: '2s',
        MODE: 'capacity',
        REPLAY: '1',
        SUMMARY_FILE: summaryFile,
      },
      { quiet: true },
    );
    assert.equal(code, 0);
    const m = JSON.parse(await readFile(summaryFile, 'utf8')).metrics;
    const inserted = m.inserted_items.values.count;
    const sent = m.sent_items.values.count;
    assert.ok(inserted >= 2000);
    // Each VU's replays are at most one fewer than its fresh requests.
    assert.ok(
      sent >= 2 * inserted - 2000 && sent <= 2 * inserted,
      `sent ${sent}, inserted ${inserted}`,
    );
    assert.equal(await db.countUsers(), before + inserted);
    assert.equal(m.successful_requests.values.rate, 1);
  });

  test('CHANGED_AT=1 in merge mode: every user carries changedAt; a changed replay is newer and updates every row, a plain replay is stale', async () => {
    for (const replay of ['changed', '1']) {
      const before = await db.countUsers();
      const summaryFile = path.join(outDir, `ordered-${replay}.json`);
      const { code } = await runK6(
        k6,
        path.join(K6_DIR, 'stress-test-batch.js'),
        {
          BASE_URL: app.baseUrl,
          TOKEN,
          VUS: '2',
          DURATION: '2s',
          MODE: 'capacity',
          REPLAY: replay,
          RESOLUTION: 'merge',
          CHANGED_AT: '1',
          SUMMARY_FILE: summaryFile,
        },
        { quiet: true },
      );
      assert.equal(code, 0, `REPLAY=${replay}`);
      const m = JSON.parse(await readFile(summaryFile, 'utf8')).metrics;
      assert.equal(
        m.successful_requests.values.rate,
        1,
        'k6 checked every answer: inserted, and updated only by a changed (newer) replay',
      );
      assert.equal(await db.countUsers(), before + m.inserted_items.values.count);
    }
    const { rows } = await db.pool.query(
      "SELECT count(*)::int AS changed, count(changed_at)::int AS ordered FROM users WHERE name LIKE 'Changed%'",
    );
    assert.ok(
      rows[0].changed > 0 && rows[0].ordered === rows[0].changed,
      `every merged row holds its newer changedAt: ${JSON.stringify(rows[0])}`,
    );
  });

  test("without SUMMARY_FILE: k6's standard summary with the test's figures, and no file unless --summary-export", async () => {
    const cwd = path.join(outDir, 'plain');
    await mkdir(cwd);
    const run = (/** @type {string[]} */ extra) =>
      new Promise((resolve, reject) => {
        const child = spawn(
          k6,
          ['run', '--no-usage-report', ...extra, path.join(K6_DIR, 'stress-test-one.js')],
          {
            cwd,
            env: {
              ...process.env,
              BASE_URL: app.baseUrl,
              TOKEN,
              VUS: '2',
              DURATION: '1s',
              SUMMARY_FILE: '',
            },
            stdio: ['ignore', 'pipe', 'pipe'],
          },
        );
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c) => (stdout += c));
        child.stderr.on('data', (c) => (stderr += c));
        child.on('error', reject);
        child.on('exit', (code) => resolve({ code, stdout, stderr }));
      });

    const plain = /** @type {{ code: number, stdout: string, stderr: string }} */ (await run([]));
    assert.equal(plain.code, 0, plain.stderr);
    assert.match(plain.stdout, /TOTAL RESULTS/, "k6's own end-of-test summary");
    assert.match(plain.stdout, /inserted_items\.*: \d+/);
    assert.match(
      plain.stderr,
      /stress-test-one: \d+ users inserted in [\d.]+ s = \d+ items\/s/,
      "the test's figures, logged before it",
    );
    assert.deepEqual(await readdir(cwd), [], 'no file dropped in the working directory');

    const exported = /** @type {{ code: number, stdout: string, stderr: string }} */ (
      await run(['--summary-export', 'summary.json'])
    );
    assert.equal(exported.code, 0, exported.stderr);
    assert.match(exported.stdout, /TOTAL RESULTS/);
    const summary = JSON.parse(await readFile(path.join(cwd, 'summary.json'), 'utf8'));
    assert.ok(summary.metrics.inserted_items.count > 0);
  });

  test('a wrong token makes k6 exit non-zero (the thresholds catch a misbehaving service)', async () => {
    const { code } = await runK6(
      k6,
      path.join(K6_DIR, 'stress-test-batch.js'),
      {
        BASE_URL: app.baseUrl,
        TOKEN: 'wrong-token',
        VUS: '1',
        DURATION: '1s',
        SUMMARY_FILE: path.join(outDir, 'refused.json'),
      },
      { quiet: true },
    );
    assert.notEqual(code, 0);
  });
});
