// A database that stops answering without closing anything (a network partition, a failover that
// leaves the old primary's connections dead, a firewall dropping packets) does not fail a query: it
// hangs it until TCP gives up, which takes minutes. TCP keepalive helps only idle connections, and
// a statement timeout is enforced by the server the client can no longer reach. So the service
// watches its own queries: when one has run longer than `stallMs`, it asks a fresh connection
// whether the database answers at all, and when it does not, it cuts the connections in flight.
// Their queries then fail at once as a lost connection, which the writer diagnoses as the database
// unavailable (503 + Retry-After) like any other outage.

/**
 * @typedef {object} Watched
 * @property {number} since  performance.now() when the query started
 * @property {(err: Error) => void} cut  ends the connection under it
 */

/**
 * @param {{
 *   probe: () => Promise<boolean>,
 *   stallMs: number,
 *   intervalMs?: number,
 *   onCut?: (count: number) => void,
 *   now?: () => number,
 * }} options
 *   probe: does the database answer on a fresh connection (bounded in time); stallMs: a query
 *   running this long makes the watchdog ask; onCut: told how many connections it cut
 */
export function createDbWatchdog({ probe, stallMs, intervalMs = Math.max(100, Math.floor(stallMs / 4)), onCut = () => {}, now = () => performance.now() }) {
  /** @type {Set<Watched>} */
  const inFlight = new Set();
  let checking = false;
  /** @type {NodeJS.Timeout | undefined} */
  let timer;

  async function check() {
    if (checking) return;
    const t = now();
    const stalled = [...inFlight].filter((w) => t - w.since >= stallMs);
    if (stalled.length === 0) return;
    checking = true;
    try {
      if (await probe()) return;
      // Only those that were stalled when asked: a query that began since may be on a new connection.
      const cut = stalled.filter((w) => inFlight.delete(w));
      for (const w of cut) w.cut(new Error('database unreachable: connection cut by the watchdog'));
      if (cut.length) onCut(cut.length);
    } finally {
      checking = false;
    }
  }

  function arm() {
    if (timer || inFlight.size === 0) return;
    timer = setInterval(() => {
      if (inFlight.size === 0) {
        clearInterval(timer);
        timer = undefined;
        return;
      }
      void check();
    }, intervalMs);
    // The watchdog never keeps the process alive on its own.
    timer.unref();
  }

  return {
    /**
     * Watches one query (or one transaction) until `done` is called.
     * @param {(err: Error) => void} cut
     * @returns {() => void} done
     */
    watch(cut) {
      /** @type {Watched} */
      const w = { since: now(), cut };
      inFlight.add(w);
      arm();
      return () => {
        inFlight.delete(w);
      };
    },
    /** Runs the check now (tests). */
    check,
    stop() {
      clearInterval(timer);
      timer = undefined;
    },
  };
}

/** @typedef {ReturnType<typeof createDbWatchdog>} DbWatchdog */
