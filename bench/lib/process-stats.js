import { readFile, readdir } from 'node:fs/promises';

// Linux's clock ticks per second for /proc times; 100 on every common kernel.
const TICKS = 100;

/** @param {number} pid @returns {Promise<{ ppid: number, self: number, children: number } | undefined>} CPU seconds */
async function stat(pid) {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (!text) return undefined;
  // Fields after the command name, which may itself hold spaces and parentheses.
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return {
    ppid: Number(f[1]),
    self: (Number(f[11]) + Number(f[12])) / TICKS,
    children: (Number(f[13]) + Number(f[14])) / TICKS,
  };
}

/** CPU seconds used so far by a process and its reaped children. @param {number} pid */
export async function processCpuSeconds(pid) {
  const s = await stat(pid);
  return s ? s.self + s.children : 0;
}

/**
 * CPU seconds used so far by a PostgreSQL server: the postmaster, its live backends and workers,
 * and the children it has already reaped.
 * @param {number} postmasterPid
 */
export async function postgresCpuSeconds(postmasterPid) {
  let total = await processCpuSeconds(postmasterPid);
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const s = await stat(Number(entry));
    if (s?.ppid === postmasterPid) total += s.self;
  }
  return total;
}

/** CPU seconds of this process's children that have ended and been waited for. */
export async function reapedChildrenCpuSeconds() {
  return (await stat(process.pid))?.children ?? 0;
}

/** @param {string} dataDir */
export async function postmasterPid(dataDir) {
  return Number((await readFile(`${dataDir}/postmaster.pid`, 'utf8')).split('\n')[0]);
}

/**
 * Samples a process's resident memory until stopped; resolves with the peak in MiB.
 * @param {number} pid
 */
export function sampleRss(pid, everyMs = 100) {
  let peakKb = 0;
  const read = async () => {
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
    if (kb > peakKb) peakKb = kb;
  };
  const timer = setInterval(read, everyMs);
  return async () => {
    clearInterval(timer);
    await read();
    return peakKb / 1024;
  };
}

/** @param {number} pid @returns {Promise<number>} resident memory in kB, 0 when the process is gone */
async function rssKb(pid) {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
}

/**
 * Resident memory now, in MiB, of a process and its direct children (a cluster's workers).
 * @param {number} pid
 */
export async function treeRssMiB(pid) {
  let kb = await rssKb(pid);
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    if ((await stat(Number(entry)))?.ppid === pid) kb += await rssKb(Number(entry));
  }
  return kb / 1024;
}
