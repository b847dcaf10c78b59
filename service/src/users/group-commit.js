import { performance } from 'node:perf_hooks';
import { DatabaseTimeoutError, refusalOfDatabaseState } from '../errors.js';
import { NO_TRACING } from '../tracing/tracing.js';
import { byEmail } from './user-schema.js';

/** @typedef {import('./user-schema.js').UserRow} UserRow */
/** @typedef {import('./user-schema.js').Resolution} Resolution */
/** @typedef {import('./user-repository.js').Counts} Counts */
/** @typedef {import('./user-repository.js').WrittenUser} WrittenUser */
/** @typedef {import('./user-repository.js').WriteOptions} WriteOptions */
/**
 * @typedef {object} Waiting  a request's validated rows, waiting for a write slot
 * @property {UserRow[]} rows  sorted by email, no email twice
 * @property {Resolution} resolution
 * @property {boolean} withRows  it wants its rows as written (return=representation)
 * @property {(counts: Counts) => void} resolve
 * @property {(err: unknown) => void} reject
 * @property {number} since  performance.now() when it arrived
 * @property {import('../tracing/tracing.js').Span | undefined} span  its write's span (traced only)
 */

/**
 * Group commit: small requests that arrive together are written by one statement and one commit.
 *
 * While a group is being written, newly validated requests wait; as soon as a write slot is free,
 * the oldest waiting requests that may go out now (up to `maxRows` rows) go as one statement,
 * sorted by email so that concurrent groups lock in the same order and cannot deadlock. No timer:
 * a group is whatever arrived while the previous one was written, so an idle service adds no
 * latency and a busy one pays one statement and one WAL flush for many requests.
 *
 * Nothing a client sees changes:
 * - A request is answered only once the statement that holds its rows has committed; that
 *   statement is atomic, so each request is all or nothing, and its counts are its own.
 * - Requests for one email are applied in the order they arrived: a request waits while an
 *   earlier one with one of its emails is being written or is still waiting. Order is kept per
 *   email, not globally: a waiting request never holds back requests for other emails. A group
 *   takes requests of one resolution.
 * - One request never fails or holds back another. A group that fails is diagnosed: when the
 *   database is unavailable (no connection, or a probe on another connection fails too) every
 *   request of the group gets 503; when its statement ran out of time every request gets 503 too,
 *   as when the users table itself is locked; when the connection was lost after the statement was
 *   sent, every request gets 503 outcome_unknown (the statement may have committed: no request
 *   of it may be told nothing was written); for any other failure, whatever its SQLSTATE, each
 *   request is written again alone, in the same write slots (no stampede on the pool), and gets its
 *   own answer.
 * - A group's statement waits for a row another writer holds only briefly (the writer's group lock
 *   timeout); the request that needs that row, written alone and still locked out, goes to a few
 *   slow-lane slots outside the write slots (`writeSlow`, DB_LOCK_TIMEOUT_MS), or gets 503
 *   lock_timeout at once when they are full. Its emails stay busy meanwhile, so a retry of it waits
 *   behind it and nothing else does.
 * - A request that wants its rows as written (return=representation) gets exactly its own: its
 *   group's statement returns every row it wrote, and each request takes those of its emails.
 *   Only such a group pays for RETURNING them.
 *
 * @param {{
 *   writeGroup: (rows: UserRow[], resolution: Resolution, withRows?: boolean) => Promise<'all' | Map<string, boolean | WrittenUser>>,
 *   writeAlone: (rows: UserRow[], resolution: Resolution, options?: WriteOptions) => Promise<Counts>,
 *   writeSlow?: (rows: UserRow[], resolution: Resolution, options?: WriteOptions) => Promise<Counts>,
 *   diagnose: (err: unknown) => Promise<import('../db.js').Diagnosis>,
 *   isTableLocked?: () => Promise<boolean>,
 *   maxRows: number,
 *   maxInFlight?: number,
 *   maxSlow?: number,
 *   observe?: (group: { requests: number, rows: number, waitedSeconds: number[] }) => void,
 *   tracing?: import('../tracing/tracing.js').Tracing,
 * }} options
 *   writeGroup: one statement for a group (UserWriter.writeGroup); writeAlone: one request on its
 *   own, failures diagnosed (UserWriter.writeUsers), as briefly locked out as a group; writeSlow:
 *   the same with the full lock timeout; diagnose: what a failed group means (Database.diagnose);
 *   isTableLocked: whether a group's lock timeout is the whole table's (Database.isTableLocked);
 *   maxInFlight: writes at once (2: one is written while the next gathers); maxSlow: slow-lane slots;
 *   tracing: the service's (off unless handed one)
 */
export function createGroupCommit({
  writeGroup, writeAlone, writeSlow, diagnose, isTableLocked = async () => false, maxRows, maxInFlight = 2, maxSlow = 4, observe = () => {}, tracing = NO_TRACING,
}) {
  /** @type {Waiting[]} */
  let waiting = [];
  /** @type {Waiting[]} requests of a failed group, to be written alone before new groups */
  const alone = [];
  /** @type {Set<string>} emails of the requests taken and not yet answered */
  const busy = new Set();
  let inFlight = 0;
  let slowInFlight = 0;

  function drain() {
    while (inFlight < maxInFlight) {
      const lone = alone.shift();
      if (lone) {
        occupy(writeLone(lone));
        continue;
      }
      const group = takeGroup();
      if (!group) return;
      occupy(writeAndCredit(group));
    }
  }

  /** @param {Promise<void>} write  holds a write slot until it ends (it answers its requests itself) */
  function occupy(write) {
    inFlight++;
    const free = () => {
      inFlight--;
      drain();
    };
    write.then(free, free);
  }

  /**
   * Answers a request and frees its emails for the requests behind it.
   * @param {Waiting} w @param {{ counts: Counts } | { err: unknown }} outcome
   */
  function answer(w, outcome) {
    for (const row of w.rows) busy.delete(row.email);
    if ('counts' in outcome) w.resolve(outcome.counts);
    else w.reject(outcome.err);
  }

  /**
   * The oldest waiting requests that may go out together now, or undefined when none may: a
   * request is passed over while one of its emails is busy or held by a request passed over before
   * it (so no request overtakes an earlier one for the same email), or when it does not fit.
   */
  function takeGroup() {
    if (waiting.length === 0) return undefined;
    /** @type {Waiting[]} */
    const group = [];
    /** @type {Waiting[]} */
    const rest = [];
    /** @type {Set<string> | undefined} emails of the requests passed over */
    let held;
    let rows = 0;
    for (let i = 0; i < waiting.length; i++) {
      const w = waiting[i];
      if (rows >= maxRows) {
        for (let j = i; j < waiting.length; j++) rest.push(waiting[j]);
        break;
      }
      const fits = group.length === 0 || (w.resolution === group[0].resolution && rows + w.rows.length <= maxRows);
      if (!fits || w.rows.some((row) => busy.has(row.email) || held?.has(row.email))) {
        held ??= new Set();
        for (const row of w.rows) held.add(row.email);
        rest.push(w);
        continue;
      }
      for (const row of w.rows) busy.add(row.email);
      group.push(w);
      rows += w.rows.length;
    }
    if (group.length === 0) return undefined;
    waiting = rest;
    return group;
  }

  /** @param {Waiting[]} group */
  async function writeAndCredit(group) {
    const started = performance.now();
    const rows = group.length === 1 ? group[0].rows : group.flatMap((w) => w.rows).sort(byEmail);
    observe({ requests: group.length, rows: rows.length, waitedSeconds: group.map((w) => (started - w.since) / 1000) });
    const withRows = group.some((w) => w.withRows);
    const write = () => (withRows ? writeGroup(rows, group[0].resolution, true) : writeGroup(rows, group[0].resolution));
    const span = tracing.enabled ? traceGroup(group, rows.length, started) : undefined;
    let written;
    try {
      written = await (span ? tracing.runInSpan(span, write) : write());
    } catch (err) {
      tracing.endSpan(span, err);
      const refusal = await refusalForAll(err);
      if (refusal) {
        for (const w of group) answer(w, { err: refusal });
        return;
      }
      // Each alone, first in line, its emails still busy: nothing overtakes it.
      alone.push(...group);
      return;
    }
    tracing.endSpan(span);
    for (const w of group) answer(w, { counts: credit(w.rows, written, w.withRows) });
  }

  /**
   * Traced: each request's span records its group, and the statement gets a span of its own that
   * links to every request it carries.
   * @param {Waiting[]} group @param {number} rows @param {number} started
   */
  function traceGroup(group, rows, started) {
    for (const w of group) {
      w.span?.setAttributes({ 'sluice.group.requests': group.length, 'sluice.group.rows': rows, 'sluice.group.wait_ms': started - w.since });
    }
    return tracing.startGroupSpan(group.map((w) => w.span), { 'sluice.group.requests': group.length, 'sluice.group.rows': rows });
  }

  /**
   * A write for one request, in its own span's context when traced (its statements are its children).
   * @param {Waiting} w @param {(rows: UserRow[], resolution: Resolution, options?: WriteOptions) => Promise<Counts>} write
   */
  function writeFor(w, write) {
    if (!w.span) return write(w.rows, w.resolution, optionsOf(w));
    const span = w.span;
    span.setAttribute('sluice.group.written_alone', true);
    return tracing.runInSpan(span, () => write(w.rows, w.resolution, optionsOf(w)));
  }

  /**
   * The answer every request of a failed group gets, when the failure is the database's state
   * rather than one request's; undefined when each should be written alone to find out.
   * @param {unknown} err
   */
  async function refusalForAll(err) {
    const diagnosis = await diagnose(err);
    if (diagnosis !== 'lock_timeout') return refusalOfDatabaseState(diagnosis, err);
    // A whole-table lock (CREATE INDEX, LOCK TABLE) would lock each request out alone as well.
    return (await isTableLocked()) ? refusalOfDatabaseState(diagnosis, err) : undefined;
  }

  /** @param {Waiting} w */
  async function writeLone(w) {
    try {
      answer(w, { counts: await writeFor(w, writeAlone) });
    } catch (err) {
      if (writeSlow && err instanceof DatabaseTimeoutError && err.code === 'lock_timeout' && slowInFlight < maxSlow) {
        slowLane(writeSlow, w);
        return;
      }
      answer(w, { err });
    }
  }

  /**
   * A request locked out by another writer waits for its row here, outside the write slots.
   * @param {NonNullable<typeof writeSlow>} write @param {Waiting} w
   */
  function slowLane(write, w) {
    slowInFlight++;
    const free = () => {
      slowInFlight--;
      drain();
    };
    writeFor(w, write)
      .then((counts) => answer(w, { counts }), (err) => answer(w, { err }))
      .then(free, free);
  }

  return {
    /**
     * Writes one request's rows with whatever else is waiting; resolves once they are committed.
     * @param {UserRow[]} rows  validated, sorted by email, no email twice
     * @param {Resolution} resolution
     * @param {WriteOptions} [options]  withRows: answer this request's rows as written too
     * @returns {Promise<Counts>} this request's rows inserted and updated
     */
    writeUsers(rows, resolution, options) {
      return new Promise((resolve, reject) => {
        waiting.push({ rows, resolution, withRows: options?.withRows === true, resolve, reject, since: performance.now(), span: tracing.activeSpan() });
        drain();
      });
    },
  };
}

const WITH_ROWS = Object.freeze({ withRows: true });
/** @param {Waiting} w @returns {WriteOptions | undefined} */
const optionsOf = (w) => (w.withRows ? WITH_ROWS : undefined);

/**
 * One request's share of what its group's statement did: its counts, and its rows as written when
 * it wants them (the statement returned rows then).
 * @param {UserRow[]} rows @param {'all' | Map<string, boolean | WrittenUser>} written @param {boolean} [withRows]
 * @returns {Counts}
 */
export function credit(rows, written, withRows = false) {
  if (written === 'all') return { inserted: rows.length, updated: 0 };
  /** @type {Counts} */
  const counts = { inserted: 0, updated: 0 };
  /** @type {WrittenUser[] | undefined} */
  const users = withRows ? [] : undefined;
  for (const row of rows) {
    const w = written.get(row.email);
    const inserted = typeof w === 'object' ? w.updatedAt === null : w;
    if (inserted === true) counts.inserted++;
    else if (inserted === false) counts.updated++;
    if (users && typeof w === 'object') users.push(w);
  }
  if (users) counts.users = users;
  return counts;
}
