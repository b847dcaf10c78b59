import { ONE_CLIENT } from './fair-share.js';
import { representation } from './representation.js';
import { READ_COLUMNS } from './write-query.js';

// The answer to a write (a batch or a streamed import), rendered from its outcome after it
// committed, and again from the same stored outcome when a request under the same Idempotency-Key
// is replayed: its counts (with `stale` in merge mode, the items that wrote nothing: inserted +
// updated + stale = received), a representation's rows, or no body when `Prefer: return=` asked;
// Preference-Applied and Content-Range as asked. With `Prefer: invalid=quarantine`, `quarantined`
// (and the first problems, `errors`) beside them: received = inserted + duplicates + quarantined.

/** @typedef {import('../users/write-types.js').Written} Written */
/** @typedef {{ status: number, headers: Record<string, string>, body: string }} Answer */
/**
 * What an answer is rendered from besides the outcome (and stored with it under a key): the
 * write options that shape it; for a representation, the columns and the emails in the order sent,
 * and how many of its users were erased since (their rows taken out of it, users/erase.js).
 * @typedef {{ resolution: import('../users/write-types.js').Resolution,
 *   return?: import('./prefer.js').Preferences['return'], count: boolean, applied?: string,
 *   invalid: boolean, select?: import('./write-query.js').ReadColumn[], emails?: string[],
 *   erased?: number }} Rendering
 */

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * A write's rendering; `sent`: its rows in the order sent, for a representation.
 * @param {import('./write-options.js').WriteOptions} options
 * @param {import('../users/user-schema.js').UserRow[]} [sent] @returns {Rendering}
 */
export function renderingOf(options, sent) {
  /** @type {Rendering} */
  const rendering = {
    resolution: options.resolution,
    count: options.count,
    invalid: options.invalid !== undefined,
  };
  if (options.return !== undefined) rendering.return = options.return;
  if (options.applied !== undefined) rendering.applied = options.applied;
  if (sent && options.return === 'representation') {
    rendering.select = options.query.select ?? [...READ_COLUMNS];
    rendering.emails = sent.map((row) => row.email);
  }
  return rendering;
}

/** The users written or found already there: not set aside. @param {Written} written */
const validOf = ({ received, quarantined }) => received - (quarantined?.count ?? 0);

/**
 * The items that wrote nothing as no newer change: in merge mode every such item, else those an
 * erasure kept out; duplicates are the rest of what wrote nothing. @param {Written} written
 * @param {Rendering['resolution']} resolution
 */
function staleAndDuplicates(written, resolution) {
  const unwritten = validOf(written) - written.inserted;
  const keptOut = written.tombstoned ?? 0;
  const stale = resolution === 'merge' ? unwritten - written.updated : keptOut;
  return { stale, duplicates: unwritten - keptOut };
}

/** @param {Rendering} rendering @param {Written} written @returns {Answer} */
export function renderAnswer(rendering, written) {
  const { received, inserted, updated, quarantined } = written;
  /** @type {Record<string, string>} */
  const headers = {};
  if (rendering.applied) headers['Preference-Applied'] = rendering.applied;
  if (rendering.count) headers['Content-Range'] = `*/${inserted + updated}`;
  // The id its items are kept under (the service's): what an operator exports them by.
  if (quarantined && quarantined.count > 0)
    headers['Quarantine-Request-Id'] = quarantined.requestId;
  const status = inserted > 0 ? 201 : 200;
  if (rendering.erased) headers['Users-Erased'] = String(rendering.erased);
  if (rendering.select) {
    const rows = representation(rendering.emails ?? [], written.users ?? [], rendering.select);
    return { status, headers: { ...headers, 'Content-Type': JSON_TYPE }, body: rows };
  }
  if (rendering.return !== undefined) return { status, headers, body: '' };
  headers['Content-Type'] = JSON_TYPE;
  const { stale, duplicates } = staleAndDuplicates(written, rendering.resolution);
  // Ignore mode says `stale` only when an erasure kept an item out.
  const counts =
    rendering.resolution === 'merge' || stale > 0
      ? { received, inserted, updated, stale, duplicates }
      : { received, inserted, updated, duplicates };
  if (!rendering.invalid) return { status, headers, body: JSON.stringify(counts) };
  const count = quarantined?.count ?? 0;
  const errors = count > 0 ? { errors: quarantined?.errors } : {};
  return { status, headers, body: JSON.stringify({ ...counts, quarantined: count, ...errors }) };
}

/**
 * Counts what was written in the metrics, and settles the client's rate charge to the users sent.
 * @param {import('express').Response} res @param {import('../metrics.js').Metrics} metrics
 * @param {Written} written @param {import('../users/quarantine.js').Quarantine} [quarantine]
 */
export function countWritten(res, metrics, written, quarantine) {
  const { received, inserted, updated } = written;
  const merge = res.locals.write.resolution === 'merge';
  metrics.usersReceived.inc(received);
  res.locals.settleUsers?.(received);
  metrics.clients.received((res.req.ingestClient ?? ONE_CLIENT).label, received);
  metrics.usersInserted.inc(inserted);
  if (updated > 0) metrics.usersUpdated.inc(updated);
  if (quarantine)
    for (const [reason, n] of Object.entries(quarantine.byReason()))
      metrics.usersQuarantined.inc({ reason }, n);
  const { stale } = staleAndDuplicates(written, merge ? 'merge' : 'ignore');
  if (stale > 0) metrics.usersStale.inc(stale);
}

/**
 * Sends an answer as rendered, with `Idempotent-Replayed: true` when it is a replay. Written
 * directly: Express's res.json checks cost a few percent of a small request's CPU.
 * @param {import('express').Response} res @param {Answer} answer @param {boolean} [replayed]
 */
export function sendAnswer(res, { status, headers, body }, replayed = false) {
  /** @type {Record<string, string | number>} */
  const sent = { ...headers };
  if (replayed) sent['Idempotent-Replayed'] = 'true';
  if (body === '') {
    sent['Content-Length'] = 0;
    res.writeHead(status, sent).end();
    return;
  }
  const bytes = Buffer.from(body);
  sent['Content-Length'] = bytes.length;
  res.writeHead(status, sent).end(bytes);
}

/**
 * Counts and answers a write once committed.
 * @param {import('express').Response} res
 * @param {import('../metrics.js').Metrics} metrics
 * @param {{ rendering: Rendering, written: Written,
 *   quarantine?: import('../users/quarantine.js').Quarantine }} write
 */
export function answerWritten(res, metrics, { rendering, written, quarantine }) {
  countWritten(res, metrics, written, quarantine);
  sendAnswer(res, renderAnswer(rendering, written));
}
