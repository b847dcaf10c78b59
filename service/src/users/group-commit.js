import { performance } from 'node:perf_hooks';
import { DatabaseUnavailableError } from '../errors.js';

/** @typedef {import('./user-schema.js').UserRow} UserRow */
/**
 * @typedef {object} Waiting  a request's validated rows, waiting for the next group
 * @property {UserRow[]} rows  sorted by email, no email twice
 * @property {(inserted: number) => void} resolve
 * @property {(err: unknown) => void} reject
 * @property {number} since  performance.now() when it arrived
 */

/**
 * Group commit: small requests that arrive together are written by one statement and one commit.
 *
 * While a group is being written, newly validated requests wait; as soon as a write slot is free,
 * everything waiting (up to `maxRows` rows) goes out as one pg-format multi-row INSERT, sorted by
 * email so that concurrent groups lock in the same order and cannot deadlock. No timer: a group is
 * whatever arrived while the previous one was written, so an idle service adds no latency and a
 * busy one pays one statement and one WAL flush for many requests.
 *
 * Nothing a client sees changes. A request is answered only once the statement that holds its rows
 * has committed; that statement is atomic, so each request is all or nothing; its count is its
 * own (an email sent by two requests of one group is credited to the first). A failure about the
 * database (unreachable, pool exhausted) fails every request of the group with 503; any other
 * failure of the shared statement writes each request again alone, so one request never fails
 * another.
 *
 * @param {{
 *   writer: import('./user-repository.js').UserWriter,
 *   maxRows: number,
 *   maxInFlight?: number,
 *   observe?: (group: { requests: number, rows: number, waitedSeconds: number[] }) => void,
 * }} options
 *   writer: writes a group (insertReturningEmails) and a request on its own (insertUsers: the
 *   retry after a group failed); maxInFlight: groups written at once (2: one is written while the next one gathers)
 */
export function createGroupCommit({ writer, maxRows, maxInFlight = 2, observe = () => {} }) {
  /** @type {Waiting[]} */
  let waiting = [];
  let inFlight = 0;

  function drain() {
    while (inFlight < maxInFlight && waiting.length > 0) {
      const group = takeGroup();
      inFlight++;
      writeGroup(group).finally(() => {
        inFlight--;
        drain();
      });
    }
  }

  /** The oldest waiting requests, at most maxRows rows (one request at least). */
  function takeGroup() {
    let rows = waiting[0].rows.length;
    let n = 1;
    while (n < waiting.length && rows + waiting[n].rows.length <= maxRows) rows += waiting[n++].rows.length;
    const group = n === waiting.length ? waiting : waiting.slice(0, n);
    waiting = n === waiting.length ? [] : waiting.slice(n);
    return group;
  }

  /** @param {Waiting[]} group */
  async function writeGroup(group) {
    const started = performance.now();
    const { rows, owner } = merge(group);
    observe({ requests: group.length, rows: rows.length, waitedSeconds: group.map((w) => (started - w.since) / 1000) });
    let inserted;
    try {
      inserted = await writer.insertReturningEmails(rows);
    } catch (err) {
      if (err instanceof DatabaseUnavailableError) {
        for (const w of group) w.reject(err);
      } else {
        for (const w of group) writer.insertUsers(w.rows).then(w.resolve, w.reject);
      }
      return;
    }
    const counts = new Array(group.length).fill(0);
    for (const [email, i] of owner) if (inserted === 'all' || inserted.has(email)) counts[i]++;
    group.forEach((w, i) => w.resolve(counts[i]));
  }

  return {
    /**
     * Writes one request's rows with whatever else is waiting; resolves once they are committed.
     * @param {UserRow[]} rows  validated, sorted by email, no email twice
     * @returns {Promise<number>} rows of this request actually inserted
     */
    insertUsers(rows) {
      return new Promise((resolve, reject) => {
        waiting.push({ rows, resolve, reject, since: performance.now() });
        drain();
      });
    },
  };
}

/**
 * One statement's rows for a group: each email once, owned by the first request that sent it,
 * sorted by email.
 * @param {Waiting[]} group
 */
export function merge(group) {
  /** @type {Map<string, number>} email → index of the request credited with it */
  const owner = new Map();
  /** @type {UserRow[]} */
  const rows = [];
  group.forEach((w, i) => {
    for (const row of w.rows) {
      if (owner.has(row[0])) continue;
      owner.set(row[0], i);
      rows.push(row);
    }
  });
  if (group.length > 1) rows.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  return { rows, owner };
}
