// A database that stops answering without closing anything (a partition, a dead failover) hangs a
// query until TCP gives up; keepalive covers only idle connections and statement_timeout is the
// unreachable server's. So a query running past `stallMs` makes the watchdog ask a fresh connection
// whether the database answers, and when it does not, the connections in flight are cut: their
// queries fail at once, diagnosed as the database unavailable (503).

/** The watchdog's cut of a connection whose database stopped answering. */
export class WatchdogCutError extends Error {
  constructor() {
    super('database unreachable: connection cut by the watchdog');
    this.name = 'WatchdogCutError';
  }
}

/**
 * @typedef {object} Watched
 * @property {number} since  performance.now() when the query started
 * @property {(err: Error) => void} cut  ends the connection under it
 */

/**
 * @param {{ probe: () => Promise<boolean>, stallMs: number, intervalMs?: number,
 *   onCut?: (count: number) => void, now?: () => number }} options probe: does the database answer
 *   on a fresh connection (bounded in time); onCut: told how many it cut
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
      // Only those that were stalled when asked: a query that began since may be on a new
      // connection.
      const cut = stalled.filter((w) => inFlight.delete(w));
      for (const w of cut) w.cut(new WatchdogCutError());
      if (cut.length) onCut(cut.length);
    } finally {
      checking = false;
    }
  }

  const ticker = tickWhileBusy(() => inFlight.size > 0, check, intervalMs);

  return {
    /**
     * Watches one lending until `done` is called.
     * @param {(err: Error) => void} cut
     * @returns {() => void} done
     */
    watch(cut) {
      /** @type {Watched} */
      const w = { since: now(), cut };
      inFlight.add(w);
      ticker.start();
      return () => {
        inFlight.delete(w);
      };
    },
    /** Runs the check now (tests). */
    check,
    stop: ticker.stop,
  };
}

/**
 * Calls `tick` every `intervalMs` once started, until a tick finds nothing `busy`.
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
