import { ONE_CLIENT } from './fair-share.js';

// The answer to a write (a batch or a streamed import): its counts (with `stale` in merge mode, the
// items that wrote nothing: inserted + updated + stale = received), a representation's rows, or no
// body when `Prefer: return=` asked; Preference-Applied and Content-Range as asked.

/** @param {import('express').Response} res @param {import('../metrics.js').Metrics} metrics @param {{ received: number, inserted: number, updated: number }} counts @param {string} [rows]  representation.js's JSON */
export function answerWritten(res, metrics, { received, inserted, updated }, rows) {
  const options = res.locals.write;
  metrics.usersReceived.inc(received);
  res.locals.settleUsers?.(received);
  metrics.clients.received((res.req.ingestClient ?? ONE_CLIENT).label, received);
  metrics.usersInserted.inc(inserted);
  if (updated > 0) metrics.usersUpdated.inc(updated);
  const merge = options.resolution === 'merge';
  const stale = merge ? received - inserted - updated : 0;
  if (stale > 0) metrics.usersStale.inc(stale);
  if (options.applied) res.setHeader('Preference-Applied', options.applied);
  if (options.count) res.setHeader('Content-Range', `*/${inserted + updated}`);
  const status = inserted > 0 ? 201 : 200;
  if (rows === undefined && options.return !== undefined) {
    res.writeHead(status, { 'Content-Length': 0 }).end();
    return;
  }
  // Written directly: Express's res.json checks cost a few percent of a small request's CPU.
  if (rows !== undefined) {
    const body = Buffer.from(rows);
    res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': body.length }).end(body);
    return;
  }
  const body = JSON.stringify(merge ? { received, inserted, updated, stale, duplicates: received - inserted } : { received, inserted, updated, duplicates: received - inserted });
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body) }).end(body);
}
