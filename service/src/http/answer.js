// The answer to a write (a batch or a streamed import): its counts (with `stale` in merge mode, the
// items that wrote nothing: inserted + updated + stale = received), a representation's rows, or no
// body when `Prefer: return=` asked; Preference-Applied and Content-Range as asked. Built as a
// StoredAnswer first, so the answer a request with an Idempotency-Key stores is the one it is sent.

/** @typedef {import('../users/idempotency-keys.js').StoredAnswer} StoredAnswer */

const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * The answer to `counts` under the request's write options. @param {import('./write-options.js').WriteOptions} options
 * @param {{ received: number, inserted: number, updated: number }} counts @param {string} [rows]  representation.js's JSON @returns {StoredAnswer}
 */
export function writtenAnswer(options, { received, inserted, updated }, rows) {
  const headers = /** @type {Record<string, string>} */ ({});
  if (options.applied) headers['Preference-Applied'] = options.applied;
  if (options.count) headers['Content-Range'] = `*/${inserted + updated}`;
  const status = inserted > 0 ? 201 : 200;
  if (rows === undefined && options.return !== undefined) return { status, headers, body: '' };
  headers['Content-Type'] = JSON_TYPE;
  if (rows !== undefined) return { status, headers, body: rows };
  const merge = options.resolution === 'merge';
  const body = JSON.stringify(merge
    ? { received, inserted, updated, stale: received - inserted - updated, duplicates: received - inserted }
    : { received, inserted, updated, duplicates: received - inserted });
  return { status, headers, body };
}

/** Counts what was written in the metrics. @param {import('../metrics.js').Metrics} metrics @param {boolean} merge @param {{ received: number, inserted: number, updated: number }} counts */
export function countWritten(metrics, merge, { received, inserted, updated }) {
  metrics.usersReceived.inc(received);
  metrics.usersInserted.inc(inserted);
  if (updated > 0) metrics.usersUpdated.inc(updated);
  const stale = merge ? received - inserted - updated : 0;
  if (stale > 0) metrics.usersStale.inc(stale);
}

/**
 * Sends an answer as built (or stored), with `Idempotent-Replayed: true` when it is a replay.
 * Written directly: Express's res.json checks cost a few percent of a small request's CPU.
 * @param {import('express').Response} res @param {StoredAnswer} answer @param {boolean} [replayed]
 */
export function sendAnswer(res, { status, headers, body }, replayed = false) {
  const sent = /** @type {Record<string, string | number>} */ ({ ...headers });
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
 * Counts and answers a write. @param {import('express').Response} res @param {import('../metrics.js').Metrics} metrics
 * @param {{ received: number, inserted: number, updated: number }} counts @param {string} [rows]  representation.js's JSON
 */
export function answerWritten(res, metrics, counts, rows) {
  const options = res.locals.write;
  countWritten(metrics, options.resolution === 'merge', counts);
  sendAnswer(res, writtenAnswer(options, counts, rows));
}
