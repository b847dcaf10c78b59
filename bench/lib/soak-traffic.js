import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { EMAIL_DOMAIN } from './soak-ledger.js';
import { percentile } from './stats.js';

const HASH = '$argon2id$v=19$m=65536,t=3,p=4$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG';

/**
 * The mix: closed-loop workers, each sending one request per period at most (less when answers
 * are slow), so the load stays moderate and bounded: a soak looks for drift, not for the ceiling.
 * At most 21 requests are in flight.
 */
export const MIX = {
  single: { workers: 16, periodMs: 100 }, // ≤ 160 requests/s of one new user
  batch: { workers: 3, periodMs: 1_000, size: 1_000 }, // ≤ 3000 new users/s
  replay: { workers: 1, periodMs: 2_000 }, // an acknowledged group sent again, half of them upper-cased
  invalid: { workers: 1, periodMs: 30_000, size: 1_000 }, // one bad user among valid ones
};
export const MAX_IN_FLIGHT = Object.values(MIX).reduce((n, k) => n + k.workers, 0);

/** @typedef {keyof typeof MIX} Kind */

/**
 * The users of one group, always the same for the same prefix, so a replay resends exactly them.
 * @param {string} prefix @param {number} size
 */
export function groupUsers(prefix, size) {
  return Array.from({ length: size }, (_, i) => ({
    email: `${prefix}-${i}@${EMAIL_DOMAIN}`,
    name: `Soak ${prefix} ${i}`,
    ...(i % 2 ? { phone: `+1555${String(i).padStart(7, '0')}` } : {}),
    ...(i % 3 ? {} : { passwordHash: HASH }),
  }));
}

/** Ways a user can be invalid; the soak cycles through them. */
const SPOILERS = [
  (/** @type {any} */ u) => ({ ...u, email: u.email.replace('@', '-at-') }),
  (/** @type {any} */ u) => ({ ...u, password: 'hunter2' }),
  (/** @type {any} */ u) => ({ ...u, name: 'x'.repeat(201) }),
  (/** @type {any} */ u) => ({ email: u.email, nmae: u.name }),
];

const freshWindow = () => ({
  /** @type {Record<Kind, number[]>} */
  ms: { single: [], batch: [], replay: [], invalid: [] },
  status: { ok: 0, invalid: 0, unavailable: 0, other: 0, network: 0 },
  usersInserted: 0,
});

/** Per-window counts and latencies, handed over and reset at each sample. */
export class WindowStats {
  w = freshWindow();

  /** @param {Kind} kind @param {import('./soak-client.js').Attempt} a */
  record(kind, a) {
    const { w } = this;
    w.ms[kind].push(a.ms);
    const s = a.status;
    if (s >= 200 && s < 300) {
      w.status.ok++;
      w.usersInserted += Number(a.body?.inserted ?? 0);
    } else if (s === 400) w.status.invalid++;
    else if (s === 503 || s === 429) w.status.unavailable++;
    else if (s === 0) w.status.network++;
    else w.status.other++;
  }

  /** The window's figures, then a fresh window. @param {number} seconds */
  take(seconds) {
    const { w } = this;
    this.w = freshWindow();
    const all = Object.values(w.ms).flat();
    return {
      requests: all.length,
      reqPerSec: all.length / seconds,
      usersPerSec: w.usersInserted / seconds,
      p99Ms: percentile(all, 0.99),
      p99SingleMs: percentile(w.ms.single, 0.99),
      p99BatchMs: percentile(w.ms.batch, 0.99),
      ...w.status,
    };
  }
}

/**
 * Runs the mix against the service until stop() is called, settling every group in the ledger.
 * 503 and 429 are retried after Retry-After, network errors after a second, with the same body
 * (replays are harmless), until `graceMs` after stop().
 *
 * @param {{ client: ReturnType<typeof import('./soak-client.js').createSoakClient>, ledger: import('./soak-ledger.js').Ledger, stats: WindowStats, graceMs?: number }} options
 */
export function startTraffic({ client, ledger, stats, graceMs = 60_000 }) {
  const stopping = new AbortController();
  // Every worker's pacing sleep listens on it.
  setMaxListeners(MAX_IN_FLIGHT + 1, stopping.signal);
  let giveUpAt = Infinity;
  /** Counts of answers that break the contract, by description. @type {Map<string, number>} */
  const violations = new Map();
  const violate = (/** @type {string} */ what) =>
    violations.set(what, (violations.get(what) ?? 0) + 1);
  const totals = {
    sent: { single: 0, batch: 0, replay: 0, invalid: 0 },
    retried503: 0,
    retriedNetwork: 0,
    usersInserted: 0,
  };
  /**
   * Attempts answered while PostgreSQL was down, and the first 2xx after it came back; of the
   * attempts sent after it came back, when the first went and how many were still refused (what
   * the recovery's delay is made of: the clients' Retry-After sleep, or the service's refusals).
   */
  const outage = {
    down: false,
    upAt: 0,
    during: { ok: 0, unavailable: 0, other: 0, network: 0 },
    recoveredAt: 0,
    firstSentAfterUp: 0,
    refusedAfterUp: 0,
  };
  const seq = { s: 0, b: 0, x: 0 };

  /** @param {Kind} kind @param {string} json */
  async function deliver(kind, json) {
    // sawDoubt: an attempt whose outcome is unknown (no answer, or 503 outcome_unknown) may have written.
    let saw503 = false,
      sawDoubt = false;
    for (;;) {
      const sentAt = Date.now();
      if (outage.upAt && !outage.firstSentAfterUp && sentAt >= outage.upAt)
        outage.firstSentAfterUp = sentAt;
      const a = await client.postUsers(json);
      stats.record(kind, a);
      if (outage.upAt && sentAt >= outage.upAt && !outage.recoveredAt && a.status === 503)
        outage.refusedAfterUp++;
      if (outage.down) {
        const s = a.status;
        const bucket =
          s >= 200 && s < 300
            ? 'ok'
            : s === 503 || s === 429
              ? 'unavailable'
              : s === 0
                ? 'network'
                : 'other';
        outage.during[bucket]++;
      } else if (outage.upAt && !outage.recoveredAt && a.status >= 200 && a.status < 300) {
        outage.recoveredAt = Date.now();
      }
      const retryable = a.status === 503 || a.status === 429 || a.status === 0;
      if (a.status === 503 && a.body?.error === 'outcome_unknown') sawDoubt = true;
      if (!retryable || Date.now() > giveUpAt) return { a, saw503, sawDoubt };
      if (a.status === 0) {
        sawDoubt = true;
        totals.retriedNetwork++;
        await sleep(1_000);
      } else {
        if (a.retryAfterSeconds === undefined) violate(`${a.status} without Retry-After`);
        saw503 = true;
        totals.retried503++;
        await sleep((a.retryAfterSeconds ?? 1) * 1_000);
      }
    }
  }

  /** A group of new users (one, a batch, or an invalid batch). @param {Kind} kind @param {'s' | 'b' | 'x'} letter @param {number} size */
  async function sendNew(kind, letter, size) {
    const prefix = `${letter}${seq[letter]++}`;
    let users = groupUsers(prefix, size);
    if (kind === 'invalid') {
      const i = Math.floor(Math.random() * size);
      users[i] = SPOILERS[seq.x % SPOILERS.length](users[i]);
    }
    const { a, saw503, sawDoubt } = await deliver(kind, JSON.stringify(users));
    users = [];
    const ok = a.status >= 200 && a.status < 300;
    if (ok) {
      totals.usersInserted += Number(a.body?.inserted ?? 0);
      // Only new emails were sent: a 2xx that calls some duplicates means an earlier attempt wrote
      // them, which only an attempt in doubt may do (no answer, or 503 outcome_unknown; any other
      // 503 says nothing was written).
      if (a.body?.inserted !== size && !sawDoubt)
        violate(
          saw503
            ? 'a 2xx after a 503 found rows written by the 503'
            : 'new users answered as duplicates',
        );
      if (kind === 'invalid') violate('an invalid batch was accepted');
      ledger.settle(prefix, size, 'acked', { replayable: kind !== 'invalid' });
    } else if (a.status === 0 || (sawDoubt && (a.status === 503 || a.status === 429))) {
      ledger.settle(prefix, size, 'doubt');
    } else {
      if (kind !== 'invalid' || a.status !== 400)
        violate(
          `${a.status} for ${kind === 'invalid' ? 'an invalid batch' : 'valid users'}${a.status === 503 ? ' (retries ran out)' : ''}`,
        );
      ledger.settle(prefix, size, 'refused');
    }
  }

  let replays = 0;
  async function sendReplay() {
    const group = ledger.randomAcked();
    if (!group) return;
    let users = groupUsers(group.prefix, group.size);
    // Emails are stored lower-cased: the upper-cased ones are the same users.
    if (replays++ % 2) users = users.map((u) => ({ ...u, email: u.email.toUpperCase() }));
    const { a } = await deliver('replay', JSON.stringify(users));
    if (a.status === 201 || (a.status === 200 && a.body?.inserted !== 0))
      violate('a replay inserted users');
    else if (a.status !== 200 && a.status !== 0) violate(`${a.status} for a replay`);
  }

  /** @param {Kind} kind @param {() => Promise<void>} send */
  async function worker(kind, send) {
    const { periodMs } = MIX[kind];
    try {
      // Spread the workers' first requests over one period.
      await sleep(Math.random() * periodMs, undefined, { signal: stopping.signal });
      while (!stopping.signal.aborted) {
        const started = Date.now();
        await send();
        totals.sent[kind]++;
        await sleep(Math.max(0, periodMs - (Date.now() - started)), undefined, {
          signal: stopping.signal,
        });
      }
    } catch (err) {
      if (!stopping.signal.aborted) throw err;
    }
  }

  const workers = [];
  for (let i = 0; i < MIX.single.workers; i++)
    workers.push(worker('single', () => sendNew('single', 's', 1)));
  for (let i = 0; i < MIX.batch.workers; i++)
    workers.push(worker('batch', () => sendNew('batch', 'b', MIX.batch.size)));
  for (let i = 0; i < MIX.replay.workers; i++) workers.push(worker('replay', sendReplay));
  for (let i = 0; i < MIX.invalid.workers; i++)
    workers.push(worker('invalid', () => sendNew('invalid', 'x', MIX.invalid.size)));
  const done = Promise.all(workers);

  return {
    violations,
    totals,
    outage,
    /** PostgreSQL is going down (true) or is back up (false). @param {boolean} down */
    markDatabase(down) {
      outage.down = down;
      if (!down) outage.upAt = Date.now();
    },
    /** No new requests; retries go on for graceMs, or stop at once with `now`. */
    async stop({ now = false } = {}) {
      giveUpAt = now ? 0 : Date.now() + graceMs;
      stopping.abort();
      await done;
    },
  };
}
