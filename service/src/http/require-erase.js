import { ForbiddenError } from '../errors.js';

// Erasing is more than writing: a route that erases puts this after authenticate and before it
// reads a body, so only a client whose credentials grant it (`"erase": true` beside its token,
// INGEST_TOKEN, a JWT role of JWT_ERASE_ROLES) gets on; any other is 403 and nothing is erased.
// Nothing configured: every request passes, as every request may write.

/**
 * @param {{ tokens?: unknown, verifyJwt?: unknown }} auth the credentials in force
 *   (auth/start-auth.js's Authentication)
 * @returns {import('express').RequestHandler}
 */
export function requireEraseRight({ tokens, verifyJwt }) {
  if (!tokens && !verifyJwt) return (_req, _res, next) => next();
  return (req, _res, next) => {
    if (req.mayErase === true) return next();
    // Its name only: the client's own, or its JWT's subject; never its credential.
    req.log.warn({ client: req.clientName }, 'refused: this client may not erase');
    return next(new ForbiddenError(req.clientName));
  };
}
