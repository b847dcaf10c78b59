import { ApiError, UnauthorizedError } from '../errors.js';
import { JwtRefusal } from '../auth/refusals.js';
import { NO_TRACING } from '../tracing/tracing.js';
import { repeatedHeaders } from './repeated-headers.js';

/** Every JWT's metric label: `sub` is the client's own word, unbounded, so it is logged instead. */
export const JWT_LABEL = 'jwt';

// A client's scope, prefixed by its credential kind up to the first colon: a token named `alice`
// and a JWT whose client claim is `alice` are two clients (their keys, their fair shares).
/** @param {string} name */
export const tokenScope = (name) => `token:${name}`;
/** No client claim: one client for every such JWT. @param {string | undefined} subject */
export const jwtScope = (subject) => `jwt:${subject ?? ''}`;

const BEARER = /^Bearer +([^ ].*)$/i;
// A signature may be empty (alg none): the verifier refuses it with a 401.
const JWT_SHAPE = /^[\w-]+\.[\w-]+\.[\w-]*$/;

/**
 * @typedef {{ accepted: (client: string) => void, refused: (reason: string) => void }} AuthMetrics
 */

/**
 * @typedef {{ match: (token: string) => string | undefined,
 *   mayErase: (name: string) => boolean }} TokenMatcher
 */

/**
 * Who may POST /users: a static token or a JWT; else 401 telling missing, malformed and invalid
 * apart (RFC 6750). A token is never kept or logged; `apikey` is ignored, as PostgREST does. The
 * request learns whether its credentials grant erasing (`mayErase`, read by require-erase.js).
 * Nothing configured: every request passes.
 * @param {{ tokens?: { current: TokenMatcher },
 *   verifyJwt?: (token: string) => Promise<import('../auth/jwt.js').JwtIdentity>,
 *   metrics: AuthMetrics,
 *   tracing?: import('../tracing/tracing.js').Tracing,
 *   clients?: import('./client-directory.js').ClientDirectory }} deps
 * @returns {import('express').RequestHandler}
 */
export function authenticate({ tokens, verifyJwt, metrics, tracing = NO_TRACING, clients }) {
  if (!tokens && !verifyJwt) return (_req, _res, next) => next();

  const { accept, refuse } = outcomes(metrics, tracing);

  return (req, _res, next) => {
    if (repeatedHeaders(req, ['authorization']).length > 0) {
      return next(
        new ApiError('duplicate_header', 'Authorization is given more than once; send it once'),
      );
    }
    const header = req.headers.authorization;
    if (header === undefined) return refuse(req, next, 'missing', 'missing');
    const match = BEARER.exec(header);
    if (!match) return refuse(req, next, 'malformed', 'malformed');
    const token = match[1];

    const set = tokens?.current;
    const client = set?.match(token);
    if (set && client !== undefined) {
      const mayErase = set.mayErase(client);
      accept(req, { name: client, scope: tokenScope(client), label: client, mayErase });
      if (clients) req.ingestClient = clients.named(client);
      return next();
    }
    if (!verifyJwt || !JWT_SHAPE.test(token)) return refuse(req, next, 'invalid', 'unknown_token');
    // Returned: Express 5 passes a rejection to the error handler rather than losing it.
    return verifyJwt(token).then(
      ({ client: subject, mayErase }) => {
        const name = subject ?? JWT_LABEL;
        accept(req, { name, scope: jwtScope(subject), label: JWT_LABEL, mayErase });
        if (clients) req.ingestClient = clients.jwt(subject);
        return next();
      },
      (err) => {
        if (!(err instanceof JwtRefusal)) return next(err);
        return refuse(req, next, 'invalid', err.reason, err.message);
      },
    );
  };
}

/** @param {AuthMetrics} metrics @param {import('../tracing/tracing.js').Tracing} tracing */
function outcomes(metrics, tracing) {
  /**
   * @param {import('express').Request} req
   * @param {{ name: string, scope: string, label: string, mayErase: boolean }} who
   */
  const accept = (req, { name, scope, label, mayErase }) => {
    req.clientName = name;
    req.clientScope = scope;
    req.mayErase = mayErase;
    metrics.accepted(label);
    tracing.activeSpan()?.setAttribute('sluice.client', name);
  };
  /**
   * @param {import('express').Request} req @param {import('express').NextFunction} next
   * @param {'missing' | 'malformed' | 'invalid'} kind @param {string} reason
   * @param {string} [message]
   */
  const refuse = (req, next, kind, reason, message) => {
    metrics.refused(reason);
    req.refusedBecause = reason;
    next(new UnauthorizedError(kind, message));
  };
  return { accept, refuse };
}
