// Prettier's command line, run as Node runs any entry point: this works outside `npm run`, whose
// PATH holds node_modules/.bin.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const cli = createRequire(import.meta.url).resolve('prettier/bin/prettier.cjs');

/**
 * Runs Prettier over the whole tree (`.prettierignore` says what it skips).
 * @param {'--check' | '--write'} mode
 * @returns {Promise<number>} its exit code
 */
export function prettier(mode) {
  const child = spawn(process.execPath, [cli, mode, '--log-level', 'warn', '.'], {
    cwd: root,
    stdio: 'inherit',
  });
  return new Promise((resolve) =>
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0))),
  );
}
