// A database that stops answering (a partition, a dead failover) hangs a query until TCP gives up:
// a query running past `stallMs` makes the watchdog ask a fresh connection whether the database
// answers; when it does not, the connections in flight are cut (503).

export class WatchdogCutError extends Error {
  constructor() {
    super('database unreachable: connection cut by the watchdog');
    this.name = 'WatchdogCutError';
  }
}

/** since: its query's start. @typedef {{ since: number, cut: (err: Error) => void }} Watched */

/**
 * @param {{ probe: () => Promise<boolean>, stallMs: number, intervalMs?: number,
 *   onCut?: (count: number) => void, now?: () => number }} options probe: bounded in time
 */
export function createDbWatchdog({
  probe,
  stallMs,
  intervalMs = Math.max(100, Math.floor(stallMs / 4)),
  onCut = () => {},
  now = () => performance.now(),
}) {
  /** @type {Set<Watched>} */
  const inFlight = new Set();
  let checking = false;

  async function check() {
    if (checking) return;
    const t = now();
    const stalled = [...inFlight].filter((w) => t - w.since >= stallMs);
    if (stalled.length === 0) return;
    checking = true;
    try {
      if (await probe()) return;
      // Only those stalled when asked: a query that began since may be on a new connection.
      const cut = stalled.filter((w) => inFlight.delete(w));
      for (const w of cut) w.cut(new WatchdogCutError());
      if (cut.length) onCut(cut.length);
    } finally {
      checking = false;
    }
  }

  const ticker = tickWhileBusy(() => inFlight.size > 0, check, intervalMs);

  return {
    /** Watches one lending until done. @param {(err: Error) => void} cut @returns {() => void} */
    watch(cut) {
      /** @type {Watched} */
      const w = { since: now(), cut };
      inFlight.add(w);
      ticker.start();
      return () => {
        inFlight.delete(w);
      };
    },
    check,
    stop: ticker.stop,
  };
}

/**
 * Calls `tick` every `intervalMs` once started, until nothing is `busy`.
 * @param {() => boolean} busy @param {() => Promise<void>} tick @param {number} intervalMs
 */
function tickWhileBusy(busy, tick, intervalMs) {
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  const stop = () => {
    clearInterval(timer);
    timer = undefined;
  };
  return {
    start() {
      if (timer || !busy()) return;
      timer = setInterval(() => {
        if (!busy()) return stop();
        void tick();
      }, intervalMs);
      timer.unref();
    },
    stop,
  };
}

/** @typedef {ReturnType<typeof createDbWatchdog>} DbWatchdog */
