import { performance } from 'node:perf_hooks';
import { NO_TRACING } from '../tracing/tracing.js';
import { byEmail } from './user-schema.js';

/** @typedef {import('./user-schema.js').UserRow} UserRow */
/** @typedef {import('./user-schema.js').Resolution} Resolution */
/** @typedef {import('./user-writer.js').Counts} Counts */
/** @typedef {import('./user-writer.js').WriteOptions} WriteOptions */
/** @typedef {import('./user-writer.js').UserWriter['write']} Write */
/** @typedef {import('../tracing/tracing.js').Tracing} Tracing */
/**
 * @typedef {object} Waiting  a request's validated rows, waiting for a write slot (a Part of its group's write)
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
 * - One request never fails or holds back another. A group that fails asks the write policy
 *   (write-policy.js) what that means: when it is the database's state (unavailable, out of time,
 *   the whole table locked, or the outcome in doubt after the connection was lost) every request
 *   of the group gets that 503; for any other failure, whatever its SQLSTATE, each request is
 *   written again alone, in the same write slots (no stampede on the pool), and gets its own answer.
 * - A group's statement waits for a row another writer holds only briefly (the policy's group lock
 *   timeout); the request that needs that row, written alone and still locked out, goes to a few
 *   slow-lane slots outside the write slots (kind 'slow', DB_LOCK_TIMEOUT_MS), or gets 503
 *   lock_timeout at once when they are full (the policy's `goesSlow`). Its emails stay busy
 *   meanwhile, so a retry of it waits behind it and nothing else does.
 * - A request that wants its rows as written (return=representation) gets exactly its own: its
 *   group's statement returns every row it wrote, and the writer credits each request those of
 *   its emails. Only such a group pays for RETURNING them.
 *
 * @param {{
 *   write: Write,
 *   policy: import('./write-policy.js').WritePolicy,
 *   maxRows: number,
 *   maxInFlight?: number,
 *   maxSlow?: number,
 *   observe?: (group: { requests: number, rows: number, waitedSeconds: number[] }) => void,
 *   tracing?: Tracing,
 * }} options
 *   write: the user writer's (UserWriter.write: kind 'group' for a group, 'alone' for a request of
 *   a failed group, 'slow' in the slow lane); policy: what a failed group means, and whether a
 *   request locked out alone goes to the slow lane; maxInFlight: writes at once (2: one is written
 *   while the next gathers); maxSlow: slow-lane slots; tracing: the service's (off unless handed one)
 */
export function createGroupCommit({ write, policy, maxRows, maxInFlight = 2, maxSlow = 4, observe = () => {}, tracing = NO_TRACING }) {
  /** @type {Waiting[]} */
  let waiting = [];
  /** @type {Waiting[]} requests of a failed group, to be written alone before new groups */
  const alone = [];
  /** @type {Set<string>} emails of the requests taken and not yet answered */
  const busy = new Set();
  const writeSlots = createSlots(maxInFlight, drain);
  const slowSlots = createSlots(maxSlow, drain);

  function drain() {
    while (writeSlots.free()) {
      const lone = alone.shift();
      const taken = lone ? undefined : takeGroup(waiting, busy, maxRows);
      if (!lone && !taken) return;
      if (taken) waiting = taken.rest;
      writeSlots.hold(lone ? writeLone(lone) : writeAndCredit(/** @type {Waiting[]} */ (taken?.group)));
    }
  }

  /** @param {Waiting[]} group */
  async function writeAndCredit(group) {
    const started = performance.now();
    const rows = group.length === 1 ? group[0].rows : group.flatMap((w) => w.rows).sort(byEmail);
    observe({ requests: group.length, rows: rows.length, waitedSeconds: group.map((w) => (started - w.since) / 1000) });
    const request = { kind: /** @type {const} */ ('group'), rows, resolution: group[0].resolution, withRows: group.some((w) => w.withRows), parts: group };
    const span = tracing.enabled ? traceGroup(tracing, group, rows.length, started) : undefined;
    let written;
    try {
      written = await (span ? tracing.runInSpan(span, () => write(request)) : write(request));
    } catch (err) {
      tracing.endSpan(span, err);
      const decision = await policy.afterFailure('group', err);
      if (decision.then === 'fail') for (const w of group) answer(busy, w, { err: decision.err });
      // Each alone, first in line, its emails still busy: nothing overtakes it.
      else alone.push(...group);
      return;
    }
    tracing.endSpan(span);
    for (let i = 0; i < group.length; i++) answer(busy, group[i], { counts: written[i] });
  }

  /** @param {Waiting} w */
  async function writeLone(w) {
    try {
      answer(busy, w, { counts: await writeFor(tracing, write, w, 'alone') });
    } catch (err) {
      if (!policy.goesSlow(err, slowSlots.free())) return answer(busy, w, { err });
      // A request locked out by another writer waits for its row here, outside the write slots.
      slowSlots.hold(writeFor(tracing, write, w, 'slow').then((counts) => answer(busy, w, { counts }), (e) => answer(busy, w, { err: e })));
    }
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

/**
 * Slots for writes at once: a write holds one until it ends (it answers its requests itself),
 * then `onFree` lets the next in.
 * @param {number} max @param {() => void} onFree
 */
function createSlots(max, onFree) {
  let used = 0;
  const release = () => {
    used--;
    onFree();
  };
  return {
    free: () => used < max,
    /** @param {Promise<unknown>} write */
    hold(write) {
      used++;
      write.then(release, release);
    },
  };
}

/**
 * Answers a request and frees its emails for the requests behind it.
 * @param {Set<string>} busy @param {Waiting} w @param {{ counts: Counts } | { err: unknown }} outcome
 */
function answer(busy, w, outcome) {
  for (const row of w.rows) busy.delete(row.email);
  if ('counts' in outcome) w.resolve(outcome.counts);
  else w.reject(outcome.err);
}

/**
 * The oldest waiting requests that may go out together now (their emails marked busy), and the
 * rest; undefined when none may: a request is passed over while one of its emails is busy or held
 * by a request passed over before it (so no request overtakes an earlier one for the same email),
 * or when it does not fit.
 * @param {Waiting[]} waiting @param {Set<string>} busy @param {number} maxRows
 */
function takeGroup(waiting, busy, maxRows) {
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
  return group.length === 0 ? undefined : { group, rest };
}

/**
 * Traced: each request's span records its group, and the statement gets a span of its own that
 * links to every request it carries.
 * @param {Tracing} tracing @param {Waiting[]} group @param {number} rows @param {number} started
 */
function traceGroup(tracing, group, rows, started) {
  for (const w of group) {
    w.span?.setAttributes({ 'sluice.group.requests': group.length, 'sluice.group.rows': rows, 'sluice.group.wait_ms': started - w.since });
  }
  return tracing.startGroupSpan(group.map((w) => w.span), { 'sluice.group.requests': group.length, 'sluice.group.rows': rows });
}

/**
 * One request written on its own (alone, or in the slow lane), in its own span's context when
 * traced (its statements are its children).
 * @param {Tracing} tracing @param {Write} write @param {Waiting} w @param {'alone' | 'slow'} kind
 * @returns {Promise<Counts>}
 */
function writeFor(tracing, write, w, kind) {
  const request = { kind, rows: w.rows, resolution: w.resolution, withRows: w.withRows };
  if (!w.span) return write(request).then(only);
  const span = w.span;
  span.setAttribute('sluice.group.written_alone', true);
  return tracing.runInSpan(span, () => write(request)).then(only);
}

/** A request written on its own: its one answer. @param {Counts[]} written */
const only = (written) => written[0];
