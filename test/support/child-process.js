import { spawn } from 'node:child_process';

/**
 * A node process of the test's, its output kept: `out()` and `err()` say what it has printed so
 * far, `exited` resolves with its exit code.
 * @param {string[]} args  node's arguments: the script, then its own
 * @param {{ cwd?: string, env: NodeJS.ProcessEnv }} options  env: the process's whole environment
 */
export function runNode(args, { cwd, env }) {
  const child = spawn(process.execPath, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  /** @type {Promise<number | null>} */
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, exited, out: () => stdout, err: () => stderr };
}
