import { performance } from 'node:perf_hooks';
import { NO_TRACING } from '../tracing/tracing.js';
import { byEmail } from './user-schema.js';

/** @type {'group'} */
const GROUP = 'group';

// Group commit: small requests that arrive while a group is written go out together, one statement
// sorted by email, each answered its own outcome once committed; a failed group asks the write
// policy. The rules: docs/architecture.md, "Group commit".

/** @import { Lanes, Observe, Outcome, Part, Resolution } from './group-types.js' */
/** @import { Tracing, Waiting, Write, WritePolicy } from './group-types.js' */

/** Group commit's write slots, each a statement on a pooled connection at once. */
export const GROUP_WRITE_SLOTS = 2;

/**
 * @param {{ write: Write, policy: WritePolicy, maxRows: number, maxInFlight?: number,
 *   maxSlow?: number, observe?: Observe, tracing?: Tracing }} options
 */
export function createGroupCommit({
  write,
  policy,
  maxRows,
  maxInFlight = GROUP_WRITE_SLOTS,
  maxSlow = 4,
  observe = () => {},
  tracing = NO_TRACING,
}) {
  /** @type {Waiting[]} */
  let waiting = [];
  /** @type {Waiting[]} */
  const alone = []; // a failed group's requests, written alone first
  /** @type {Set<string>} */
  const busy = new Set(); // emails taken and not yet answered
  const writeSlots = createSlots(maxInFlight, drain);
  const slowSlots = createSlots(maxSlow, drain);

  function drain() {
    while (writeSlots.free()) {
      const lone = alone.shift();
      const taken = lone ? undefined : takeGroup(waiting, busy, maxRows);
      if (!lone && !taken) return;
      if (taken) waiting = taken.rest;
      writeSlots.hold(
        lone ? writeLone(lone) : writeAndCredit(/** @type {Waiting[]} */ (taken?.group)),
      );
    }
  }

  /** @type {Lanes} */
  const lanes = { write, policy, tracing, busy, alone, slowSlots };
  /** @param {Waiting[]} group */
  const writeAndCredit = (group) => writeGroup(lanes, group, observe);
  /** @param {Waiting} w */
  const writeLone = (w) => writeAlone(lanes, w);

  return {
    /** @param {Part} part @param {Resolution} resolution @returns {Promise<Outcome>} */
    writeUsers(part, resolution) {
      return new Promise((resolve, reject) => {
        /** @type {Waiting} */
        const w = {
          ...part,
          resolution,
          resolve,
          reject,
          since: performance.now(),
          span: tracing.activeSpan(),
        };
        waiting.push(w);
        drain();
      });
    },
  };
}

/**
 * A group written and each request answered its own outcome; a failure as the policy says: every
 * request answered it, or each written alone, first in line, its emails still busy, so nothing
 * overtakes it. @param {Lanes} lanes @param {Waiting[]} group @param {Observe} observe
 */
async function writeGroup({ write, policy, tracing, busy, alone }, group, observe) {
  const started = performance.now();
  const rows = group.length === 1 ? group[0].rows : group.flatMap((w) => w.rows).sort(byEmail);
  observe({
    requests: group.length,
    rows: rows.length,
    waitedSeconds: group.map((w) => (started - w.since) / 1000),
  });
  const request = { kind: GROUP, rows, resolution: group[0].resolution, parts: group };
  const span = tracing.enabled ? traceGroup(tracing, group, rows.length, started) : undefined;
  let written;
  try {
    written = await (span ? tracing.runInSpan(span, () => write(request)) : write(request));
  } catch (err) {
    tracing.endSpan(span, err);
    const decision = await policy.afterFailure('group', err);
    if (decision.then === 'fail') for (const w of group) answer(busy, w, { err: decision.err });
    else alone.push(...group);
    return;
  }
  tracing.endSpan(span);
  for (let i = 0; i < group.length; i++) answer(busy, group[i], { counts: written[i] });
}

/**
 * A request of a failed group, alone; locked out by another writer, it waits for its row in the
 * slow lane, outside the write slots, when one is free. @param {Lanes} lanes @param {Waiting} w
 */
async function writeAlone({ write, policy, tracing, busy, slowSlots }, w) {
  try {
    answer(busy, w, { counts: await writeFor(tracing, write, w, 'alone') });
  } catch (err) {
    if (!policy.goesSlow(err, slowSlots.free())) return answer(busy, w, { err });
    slowSlots.hold(
      writeFor(tracing, write, w, 'slow').then(
        (counts) => answer(busy, w, { counts }),
        (e) => answer(busy, w, { err: e }),
      ),
    );
  }
}

/** `onFree` lets the next in. @param {number} max @param {() => void} onFree */
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
 * Answers a request, freeing its emails. @param {Set<string>} busy @param {Waiting} w
 * @param {{ counts: Outcome } | { err: unknown }} outcome
 */
function answer(busy, w, outcome) {
  for (const row of w.rows) busy.delete(row.email);
  if ('counts' in outcome) w.resolve(outcome.counts);
  else w.reject(outcome.err);
}

/**
 * The oldest waiting requests that may go together now (emails marked busy), and the rest; a
 * request is passed over when it does not fit or an email of it is busy or held by one passed over.
 * @param {Waiting[]} waiting @param {Set<string>} busy @param {number} maxRows
 */
function takeGroup(waiting, busy, maxRows) {
  if (waiting.length === 0) return undefined;
  /** @type {Waiting[]} */
  const group = [];
  /** @type {Waiting[]} */
  const rest = [];
  /** @type {Set<string> | undefined} */
  let held = undefined; // emails of the requests passed over
  let rows = 0;
  for (let i = 0; i < waiting.length; i++) {
    const w = waiting[i];
    if (rows >= maxRows) {
      for (let j = i; j < waiting.length; j++) rest.push(waiting[j]);
      break;
    }
    const fits =
      group.length === 0 ||
      (w.resolution === group[0].resolution && rows + w.rows.length <= maxRows);
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
 * Traced: each request's span records its group; the statement's links to every request.
 * @param {Tracing} tracing @param {Waiting[]} group @param {number} rows @param {number} started
 */
function traceGroup(tracing, group, rows, started) {
  for (const w of group) {
    w.span?.setAttributes({
      'sluice.group.requests': group.length,
      'sluice.group.rows': rows,
      'sluice.group.wait_ms': started - w.since,
    });
  }
  return tracing.startGroupSpan(
    group.map((w) => w.span),
    { 'sluice.group.requests': group.length, 'sluice.group.rows': rows },
  );
}

/**
 * @param {Tracing} tracing @param {Write} write @param {Waiting} w @param {'alone' | 'slow'} kind
 * @returns {Promise<Outcome>}
 */
function writeFor(tracing, write, w, kind) {
  const request = { kind, rows: w.rows, resolution: w.resolution, parts: [w] };
  if (!w.span) return write(request).then(only);
  const span = w.span;
  span.setAttribute('sluice.group.written_alone', true);
  return tracing.runInSpan(span, () => write(request)).then(only);
}

/** A request written on its own: its one answer. @param {Outcome[]} written */
const only = (written) => written[0];
