import { ONE_CLIENT } from './fair-share.js';

// The answer to a write (a batch or a streamed import): its counts (with `stale` in merge mode, the
// items that wrote nothing: inserted + updated + stale = received), a representation's rows, or no
// body when `Prefer: return=` asked; Preference-Applied and Content-Range as asked. With
// `Prefer: invalid=quarantine`, `quarantined` (and the first problems, `errors`) beside them:
// received = inserted + duplicates + quarantined. Built as a StoredAnswer first, so the answer a
// request with an Idempotency-Key stores is the one it is sent.

/** @typedef {import('../users/idempotency-keys.js').StoredAnswer} StoredAnswer */
/**
 * @typedef {{ received: number, inserted: number, updated: number,
 *   quarantine?: import('../users/quarantine.js').Quarantine }} WrittenCounts
 */

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * The users written or found already there: those received less those set aside.
 * @param {number} received
 * @param {WrittenCounts['quarantine']} quarantine
 */
const validOf = (received, quarantine) => received - (quarantine?.count ?? 0);

/**
 * The answer to `counts` under the request's write options.
 * @param {import('./write-options.js').WriteOptions} options
 * @param {WrittenCounts} counts
 * @param {string} [rows] representation.js's JSON
 * @returns {StoredAnswer}
 */
export function writtenAnswer(options, { received, inserted, updated, quarantine }, rows) {
  /** @type {Record<string, string>} */
  const headers = {};
  if (options.applied) headers['Preference-Applied'] = options.applied;
  if (options.count) headers['Content-Range'] = `*/${inserted + updated}`;
  // The id its items are kept under (the service's): what an operator exports them by.
  if (quarantine && quarantine.count > 0) headers['Quarantine-Request-Id'] = quarantine.requestId;
  const status = inserted > 0 ? 201 : 200;
  if (rows === undefined && options.return !== undefined) return { status, headers, body: '' };
  headers['Content-Type'] = JSON_TYPE;
  if (rows !== undefined) return { status, headers, body: rows };
  const quarantined = quarantine?.count ?? 0;
  const valid = validOf(received, quarantine);
  const counts =
    options.resolution === 'merge'
      ? {
          received,
          inserted,
          updated,
          stale: valid - inserted - updated,
          duplicates: valid - inserted,
        }
      : { received, inserted, updated, duplicates: valid - inserted };
  const body = JSON.stringify(
    options.invalid
      ? { ...counts, quarantined, ...(quarantined > 0 ? { errors: quarantine?.errors } : {}) }
      : counts,
  );
  return { status, headers, body };
}

/**
 * Counts what was written in the metrics, and settles the client's rate charge to the users it
 * sent.
 * @param {import('express').Response} res
 * @param {import('../metrics.js').Metrics} metrics
 * @param {WrittenCounts} counts
 */
export function countWritten(res, metrics, { received, inserted, updated, quarantine }) {
  const merge = res.locals.write.resolution === 'merge';
  metrics.usersReceived.inc(received);
  res.locals.settleUsers?.(received);
  metrics.clients.received((res.req.ingestClient ?? ONE_CLIENT).label, received);
  metrics.usersInserted.inc(inserted);
  if (updated > 0) metrics.usersUpdated.inc(updated);
  if (quarantine)
    for (const [reason, n] of Object.entries(quarantine.byReason()))
      metrics.usersQuarantined.inc({ reason }, n);
  const stale = merge ? validOf(received, quarantine) - inserted - updated : 0;
  if (stale > 0) metrics.usersStale.inc(stale);
}

/**
 * Sends an answer as built (or stored), with `Idempotent-Replayed: true` when it is a replay.
 * Written directly: Express's res.json checks cost a few percent of a small request's CPU.
 * @param {import('express').Response} res @param {StoredAnswer} answer @param {boolean} [replayed]
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
 * Counts and answers a write.
 * @param {import('express').Response} res
 * @param {import('../metrics.js').Metrics} metrics
 * @param {WrittenCounts} counts @param {string} [rows]  representation.js's JSON
 */
export function answerWritten(res, metrics, counts, rows) {
  const options = res.locals.write;
  countWritten(res, metrics, counts);
  sendAnswer(res, writtenAnswer(options, counts, rows));
}
