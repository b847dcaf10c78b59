import { spawn } from 'node:child_process';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const SERVER = fileURLToPath(new URL('../../service/src/server.js', import.meta.url));

/**
 * The real service as a child process (node service/src/server.js) on 127.0.0.1 and a free port,
 * with its JSON log lines collected.
 * @param {Record<string, string>} env
 * @param {{ script?: string, nodeArgs?: string[], cwd?: string }} [options]  script: another server
 *   that logs the same `listening` line (the bench's naive baseline); nodeArgs: Node's own flags (a
 *   profile); cwd: where relative paths of its variables lead (a tokens file)
 */
export async function startServerProcess(env, { script = SERVER, nodeArgs = [], cwd } = {}) {
  const child = spawn(process.execPath, [...nodeArgs, script], {
    cwd,
    // At least info: the port is read from the `listening` line.
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: '0',
      ...env,
      LOG_LEVEL: env.LOG_LEVEL === 'debug' || env.LOG_LEVEL === 'trace' ? env.LOG_LEVEL : 'info',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  /** @type {any[]} */
  const logs = [];
  /** @type {Set<() => void>} */
  const waiters = new Set();
  readline
    .createInterface({ input: /** @type {import('node:stream').Readable} */ (child.stdout) })
    .on('line', (line) => {
      try {
        logs.push(JSON.parse(line));
      } catch {
        logs.push({ msg: line });
      }
      for (const w of waiters) w();
    });
  /** @type {Promise<{ code: number | null, signal: string | null }>} */
  const exited = new Promise((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );

  /**
   * Resolves with the first log line (from `from` on) that matches.
   * @param {(line: any) => boolean} matches
   * @param {{ timeoutMs?: number, from?: number }} [options]
   */
  function waitForLog(matches, { timeoutMs = 15_000, from = 0 } = {}) {
    return new Promise((resolve, reject) => {
      const check = () => {
        const found = logs.slice(from).find(matches);
        if (!found) return;
        waiters.delete(check);
        clearTimeout(timer);
        resolve(found);
      };
      const timer = setTimeout(() => {
        waiters.delete(check);
        reject(
          new Error(
            `no matching log line in ${timeoutMs} ms; got:\n${logs.map((l) => JSON.stringify(l)).join('\n')}`,
          ),
        );
      }, timeoutMs);
      waiters.add(check);
      check();
    });
  }

  // A server that never says it listens is not left running behind a failed test or bench.
  const listening = await waitForLog((l) => l.msg === 'listening').catch((err) => {
    child.kill('SIGKILL');
    throw err;
  });
  return {
    child,
    logs,
    waitForLog,
    exited,
    baseUrl: `http://127.0.0.1:${listening.port}`,
    /** Stops it if it still runs (test clean-up). */
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
