import { spawn } from 'node:child_process';
import { access, constants, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import which from 'which';
import { reapedChildrenCpuSeconds } from './process-stats.js';

export const K6_VERSION = 'v1.8.1';
// Outside the repository: the binary is 70 MB and is built once per machine, not per clone.
export const CACHE_BIN = path.join(
  process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'),
  'sluice',
  'bin',
);

/** @param {string} file */
const isExecutable = (file) =>
  access(file, constants.X_OK).then(
    () => true,
    () => false,
  );

/**
 * k6 from PATH, else from the cache, else built once with `go install` into the cache.
 * @param {{ log?: (msg: string) => void }} [options]
 * @returns {Promise<string>} the k6 executable
 */
export async function findK6({ log = (m) => console.error(m) } = {}) {
  const found =
    (await which('k6', { nothrow: true })) ??
    ((await isExecutable(path.join(CACHE_BIN, 'k6'))) ? path.join(CACHE_BIN, 'k6') : undefined);
  if (found) return found;

  const go = await which('go', { nothrow: true });
  if (!go) {
    throw new Error(
      `k6 is not on PATH and Go is not installed to build it. Install k6 ${K6_VERSION} (a release binary, ` +
        `your package manager, or the grafana/k6 image) and put it on PATH, or install Go and run this again.`,
    );
  }
  await mkdir(CACHE_BIN, { recursive: true });
  log(`building k6 ${K6_VERSION} once with go install into ${CACHE_BIN} (a few minutes)...`);
  const started = Date.now();
  const code = await new Promise((resolve) => {
    const child = spawn(go, ['install', `go.k6.io/k6@${K6_VERSION}`], {
      env: { ...process.env, GOBIN: CACHE_BIN },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    const ticker = setInterval(
      () => log(`  still building k6 (${Math.round((Date.now() - started) / 1000)} s)`),
      30_000,
    );
    child.on('exit', (c) => {
      clearInterval(ticker);
      resolve(c);
    });
  });
  if (code !== 0)
    throw new Error(
      `go install go.k6.io/k6@${K6_VERSION} failed (exit ${code}); install k6 by hand and put it on PATH`,
    );
  log(`k6 built in ${Math.round((Date.now() - started) / 1000)} s`);
  return path.join(CACHE_BIN, 'k6');
}

/**
 * Runs one k6 script; resolves with its exit code and the CPU seconds k6 itself used (the load
 * generator shares the machine with the service and the database).
 * @param {string} k6
 * @param {string} script
 * @param {Record<string, string>} env
 * @param {{ quiet?: boolean }} [options]
 * @returns {Promise<{ code: number, cpuSeconds: number }>}
 */
export async function runK6(k6, script, env, { quiet = false } = {}) {
  // k6 is the only child that ends in this window, so the growth of our reaped children's CPU is its.
  const before = await reapedChildrenCpuSeconds();
  const code = await new Promise((resolve, reject) => {
    const child = spawn(k6, ['run', '--quiet', '--no-usage-report', script], {
      env: { ...process.env, ...env },
      stdio: ['ignore', quiet ? 'ignore' : 'inherit', 'inherit'],
    });
    child.on('error', reject);
    child.on('exit', (c) => resolve(c ?? 1));
  });
  return { code, cpuSeconds: (await reapedChildrenCpuSeconds()) - before };
}
