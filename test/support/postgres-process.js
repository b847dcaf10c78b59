// The processes of a PostgreSQL the tests kill (crash and kill -9 tests).
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';

/** The postmaster's pid, from the first line of its data directory's postmaster.pid. @param {string} dataDir */
export async function postmasterPid(dataDir) {
  return Number((await readFile(path.join(dataDir, 'postmaster.pid'), 'utf8')).split('\n')[0]);
}

/** Whether a process still runs. @param {number} pid */
export function isAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The postmaster and every process it started (its backends, its workers), from /proc. @param {number} postmaster */
export async function postgresProcesses(postmaster) {
  const pids = [postmaster];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    // The parent is the second field after the command, which is in parentheses and may hold spaces.
    const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (parent === postmaster) pids.push(Number(entry));
  }
  return pids;
}
