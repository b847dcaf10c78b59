import { randomUUID } from 'node:crypto';
import { Quarantine } from '../users/quarantine.js';
import { ANONYMOUS_CLIENT } from './fair-share.js';

// Scoped as a request's keys are, so no client names another's; named by an id the service made
// (a client's X-Request-Id is its own word, kept beside).

/**
 * @param {import('express').Request} req
 * @param {import('../users/quarantine-types.js').QuarantineFormat} format
 * @param {{ maxInvalid: number }} invalid
 * @param {import('../users/quarantine-types.js').ClientBound} bound
 */
export function quarantineOf(req, format, { maxInvalid }, bound) {
  return new Quarantine({
    client: req.clientName ?? ANONYMOUS_CLIENT,
    scope: req.clientScope ?? ANONYMOUS_CLIENT,
    requestId: req.clientRequestId === undefined ? req.id : randomUUID(),
    clientRequestId: req.clientRequestId,
    format,
    maxInvalid,
    bound,
  });
}
