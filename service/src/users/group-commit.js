import { performance } from 'node:perf_hooks';
import { DatabaseUnavailableError } from '../errors.js';
import { byEmail } from './user-schema.js';

/** @typedef {import('./user-schema.js').UserRow} UserRow */
/** @typedef {import('./user-schema.js').Resolution} Resolution */
/** @typedef {import('./user-repository.js').Counts} Counts */
/**
 * @typedef {object} Waiting  a request's validated rows, waiting for a write slot
 * @property {UserRow[]} rows  sorted by email, no email twice
 * @property {Resolution} resolution
 * @property {(counts: Counts) => void} resolve
 * @property {(err: unknown) => void} reject
 * @property {number} since  performance.now() when it arrived
 */

/**
 * Group commit: small requests that arrive together are written by one statement and one commit.
 *
 * While a group is being written, newly validated requests wait; as soon as a write slot is free,
 * the oldest waiting requests (up to `maxRows` rows) go out as one statement, sorted by email so
 * that concurrent groups lock in the same order and cannot deadlock. No timer: a group is whatever
 * arrived while the previous one was written, so an idle service adds no latency and a busy one
 * pays one statement and one WAL flush for many requests.
 *
 * Nothing a client sees changes:
 * - A request is answered only once the statement that holds its rows has committed; that
 *   statement is atomic, so each request is all or nothing, and its counts are its own.
 * - Requests are applied in the order they arrived: a group takes requests of one resolution, and
 *   never two that share an email, nor one that shares an email with a group still being written
 *   (it waits for that one to commit).
 * - One request never fails another. A group that fails is diagnosed: when the database is
 *   unavailable (no connection, or a probe on another connection fails too) every request of the
 *   group gets 503; for any other failure, whatever its SQLSTATE, each request is written again
 *   alone, in the same write slots (no stampede on the pool), and gets its own answer.
 *
 * @param {{
 *   writeGroup: (rows: UserRow[], resolution: Resolution) => Promise<'all' | Map<string, boolean>>,
 *   writeAlone: (rows: UserRow[], resolution: Resolution) => Promise<Counts>,
 *   diagnose: (err: unknown) => Promise<import('../db.js').Diagnosis>,
 *   maxRows: number,
 *   maxInFlight?: number,
 *   observe?: (group: { requests: number, rows: number, waitedSeconds: number[] }) => void,
 * }} options
 *   writeGroup: one statement for a group (UserWriter.writeGroup); writeAlone: one request on its
 *   own, failures diagnosed (UserWriter.writeUsers); diagnose: what a failed group means
 *   (Database.diagnose); maxInFlight: writes at once (2: one is written while the next gathers)
 */
export function createGroupCommit({ writeGroup, writeAlone, diagnose, maxRows, maxInFlight = 2, observe = () => {} }) {
  /** @type {Waiting[]} */
  let waiting = [];
  /** @type {Waiting[]} requests of a failed group, to be written alone before new groups */
  const alone = [];
  /** @type {Set<string>} emails of the requests being written */
  const busy = new Set();
  let inFlight = 0;

  function drain() {
    while (inFlight < maxInFlight) {
      const lone = alone.shift();
      if (lone) {
        for (const row of lone.rows) busy.add(row[0]);
        start(writeAlone(lone.rows, lone.resolution).then(lone.resolve, lone.reject), [lone]);
        continue;
      }
      const group = takeGroup();
      if (!group) return;
      start(writeAndCredit(group), group);
    }
  }

  /** @param {Promise<unknown>} write @param {Waiting[]} requests  their emails are busy until it ends */
  function start(write, requests) {
    inFlight++;
    write.finally(() => {
      inFlight--;
      for (const w of requests) for (const row of w.rows) busy.delete(row[0]);
      drain();
    });
  }

  /**
   * The oldest waiting requests that may go out together now (one at least), or undefined when
   * the oldest must wait for a write in flight that holds one of its emails.
   */
  function takeGroup() {
    let n = 0;
    let rows = 0;
    while (n < waiting.length) {
      const next = waiting[n];
      if (n > 0 && (next.resolution !== waiting[0].resolution || rows + next.rows.length > maxRows)) break;
      if (next.rows.some((row) => busy.has(row[0]))) break;
      for (const row of next.rows) busy.add(row[0]);
      rows += next.rows.length;
      n++;
    }
    if (n === 0) return undefined;
    const group = waiting.slice(0, n);
    waiting = n === waiting.length ? [] : waiting.slice(n);
    return group;
  }

  /** @param {Waiting[]} group */
  async function writeAndCredit(group) {
    const started = performance.now();
    const rows = group.length === 1 ? group[0].rows : group.flatMap((w) => w.rows).sort(byEmail);
    observe({ requests: group.length, rows: rows.length, waitedSeconds: group.map((w) => (started - w.since) / 1000) });
    let written;
    try {
      written = await writeGroup(rows, group[0].resolution);
    } catch (err) {
      if ((await diagnose(err)) === 'unavailable') {
        const unavailable = err instanceof DatabaseUnavailableError ? err : new DatabaseUnavailableError(err);
        for (const w of group) w.reject(unavailable);
        return;
      }
      // Each alone, first in line: no group is formed while one waits, so nothing overtakes it.
      alone.push(...group);
      return;
    }
    for (const w of group) w.resolve(credit(w.rows, written));
  }

  return {
    /**
     * Writes one request's rows with whatever else is waiting; resolves once they are committed.
     * @param {UserRow[]} rows  validated, sorted by email, no email twice
     * @param {Resolution} resolution
     * @returns {Promise<Counts>} this request's rows inserted and updated
     */
    writeUsers(rows, resolution) {
      return new Promise((resolve, reject) => {
        waiting.push({ rows, resolution, resolve, reject, since: performance.now() });
        drain();
      });
    },
  };
}

/**
 * One request's share of what its group's statement did.
 * @param {UserRow[]} rows @param {'all' | Map<string, boolean>} written
 * @returns {Counts}
 */
export function credit(rows, written) {
  if (written === 'all') return { inserted: rows.length, updated: 0 };
  const counts = { inserted: 0, updated: 0 };
  for (const row of rows) {
    const inserted = written.get(row[0]);
    if (inserted === true) counts.inserted++;
    else if (inserted === false) counts.updated++;
  }
  return counts;
}
