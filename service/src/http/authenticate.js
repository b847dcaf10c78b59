import { ApiError, UnauthorizedError } from '../errors.js';
import { JwtRefusal } from '../auth/refusals.js';
import { NO_TRACING } from '../tracing/tracing.js';
import { repeatedHeaders } from './repeated-headers.js';

/**
 * The metric label of every JWT's client: `sub` is the client's own word, unbounded, so it is
 * logged, not a label.
 */
export const JWT_LABEL = 'jwt';

// A client's scope: who it is across credential kinds, so that a token named `alice` and a JWT
// whose client claim is `alice` are two clients (their Idempotency-Keys, their fair shares). The
// kind is a prefix that ends at the first colon, so no name or subject can stand for another
// kind's.
/** The scope of a static token's client, by its configured name. @param {string} name */
export const tokenScope = (name) => `token:${name}`;
/**
 * The scope of a JWT's client, by its client claim (none: one client for every such JWT).
 * @param {string | undefined} subject
 */
export const jwtScope = (subject) => `jwt:${subject ?? ''}`;

// The scheme is case-insensitive (RFC 9110, 11.1); spaces after it are allowed, as many as sent.
const BEARER = /^Bearer +([^ ].*)$/i;
// Three base64url parts (a signature may be empty: alg none, refused by the verifier with a 401).
const JWT_SHAPE = /^[\w-]+\.[\w-]+\.[\w-]*$/;

/**
 * accepted: a label of configured names (and `jwt`) only; refused: a fixed word.
 * @typedef {{ accepted: (client: string) => void, refused: (reason: string) => void }} AuthMetrics
 */

/**
 * Who may POST /users: a client's static token (auth/token-source.js keeps them current) or a JWT
 * (auth/jwt.js); else 401 `unauthorized`, WWW-Authenticate telling missing, malformed
 * (invalid_request) and invalid (invalid_token) apart (RFC 6750). An accepted request carries its
 * client's name in `req.clientName` (the log, the span, the metric), its scope in `req.clientScope`
 * (its keys) and, given a directory, its limits in `req.ingestClient` (client-directory.js); a
 * token is never kept or logged; `apikey` is ignored, as PostgREST does. Nothing configured: every
 * request passes (one client, `anonymous`).
 * @param {{ tokens?: { current: { match: (token: string) => string | undefined } },
 *   verifyJwt?: (token: string) => Promise<string | undefined>, metrics: AuthMetrics,
 *   tracing?: import('../tracing/tracing.js').Tracing,
 *   clients?: import('./client-directory.js').ClientDirectory }} deps @returns
 *   {import('express').RequestHandler}
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

    const client = tokens?.current.match(token);
    if (client !== undefined) {
      accept(req, client, tokenScope(client), client, clients?.named(client));
      return next();
    }
    if (!verifyJwt || !JWT_SHAPE.test(token)) return refuse(req, next, 'invalid', 'unknown_token');
    // Returned: Express 5 passes a rejection to the error handler rather than losing it.
    return verifyJwt(token).then(
      (subject) => {
        accept(req, subject ?? JWT_LABEL, jwtScope(subject), JWT_LABEL, clients?.jwt(subject));
        return next();
      },
      (err) => {
        if (!(err instanceof JwtRefusal)) return next(err);
        return refuse(req, next, 'invalid', err.reason, err.message);
      },
    );
  };
}

/**
 * A request accepted (its client set on it, counted, named on its span) or refused (counted, a
 * 401 handed to `next`).
 * @param {AuthMetrics} metrics @param {import('../tracing/tracing.js').Tracing} tracing
 */
function outcomes(metrics, tracing) {
  /**
   * @param {import('express').Request} req
   * @param {string} client
   * @param {string} scope
   * @param {string} label
   * @param {import('./client-directory.js').Client} [limited]
   */
  const accept = (req, client, scope, label, limited) => {
    req.clientName = client;
    req.clientScope = scope;
    if (limited) req.ingestClient = limited;
    metrics.accepted(label);
    tracing.activeSpan()?.setAttribute('sluice.client', client);
  };
  /**
   * @param {import('express').Request} req
   * @param {import('express').NextFunction} next
   * @param {'missing' | 'malformed' | 'invalid'} kind
   * @param {string} reason
   * @param {string} [message]
   */
  const refuse = (req, next, kind, reason, message) => {
    metrics.refused(reason);
    req.refusedBecause = reason;
    next(new UnauthorizedError(kind, message));
  };
  return { accept, refuse };
}
