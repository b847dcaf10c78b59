import { ApiError, UnauthorizedError } from '../errors.js';
import { JwtRefusal } from '../auth/refusals.js';
import { NO_TRACING } from '../tracing/tracing.js';
import { repeatedHeaders } from './repeated-headers.js';

/** The metric label of every JWT's client: `sub` is the client's own word, unbounded, so it is logged, not a label. */
export const JWT_LABEL = 'jwt';

// The scheme is case-insensitive (RFC 9110, 11.1); spaces after it are allowed, as many as sent.
const BEARER = /^Bearer +([^ ].*)$/i;
// Three base64url parts (a signature may be empty: alg none, refused by the verifier with a 401).
const JWT_SHAPE = /^[\w-]+\.[\w-]+\.[\w-]*$/;

/**
 * @typedef {object} AuthMetrics
 * @property {(client: string) => void} accepted  a label of configured names (and `jwt`) only
 * @property {(reason: string) => void} refused   a fixed word
 */

/**
 * Who may POST /users: a client's static token (INGEST_TOKEN, INGEST_TOKENS, from a file or a
 * secret: auth/token-source.js keeps the set current) or a JWT (auth/jwt.js). A request is
 * refused with a 401 `unauthorized` whose WWW-Authenticate tells three cases apart (errors.js
 * UnauthorizedError; RFC 6750): no Authorization header (no error attribute), a malformed one
 * (invalid_request), a token that is not valid (invalid_token: a token no client has, or a JWT
 * that does not verify, its message saying why).
 *
 * An accepted request carries its client's name in `req.clientName` (not `req.client`: Node's alias of the socket): the access log writes it, the
 * request's span gets it as `sluice.client`, and it counts in sluice_auth_accepted_total by client
 * (a configured name, or `jwt`: a JWT's `sub` is logged, never a label). The token itself is never
 * kept, logged or echoed. An `apikey` header (supabase-js sends one) is ignored, as PostgREST
 * ignores it: only Supabase's gateway reads it, and the bearer decides here.
 *
 * Nothing configured: every request passes, as before.
 *
 * @param {{
 *   tokens?: { current: { match: (token: string) => string | undefined } },
 *   verifyJwt?: (token: string) => Promise<string | undefined>,
 *   metrics: AuthMetrics,
 *   tracing?: import('../tracing/tracing.js').Tracing,
 * }} deps  tokens: the static tokens in force (read at each request: a refresh replaces them);
 *   tracing: the request's span gets the client's name
 * @returns {import('express').RequestHandler}
 */
export function authenticate({ tokens, verifyJwt, metrics, tracing = NO_TRACING }) {
  if (!tokens && !verifyJwt) return (_req, _res, next) => next();

  /** @param {import('express').Request} req @param {string} client @param {string} label */
  const accept = (req, client, label) => {
    req.clientName = client;
    metrics.accepted(label);
    tracing.activeSpan()?.setAttribute('sluice.client', client);
  };
  /** @param {import('express').NextFunction} next @param {'missing' | 'malformed' | 'invalid'} kind @param {string} reason @param {string} [message] */
  const refuse = (next, kind, reason, message) => {
    metrics.refused(reason);
    next(new UnauthorizedError(kind, message));
  };

  return (req, _res, next) => {
    if (repeatedHeaders(req, ['authorization']).length > 0) {
      return next(new ApiError('duplicate_header', 'Authorization is given more than once; send it once'));
    }
    const header = req.headers.authorization;
    if (header === undefined) return refuse(next, 'missing', 'missing');
    const match = BEARER.exec(header);
    if (!match) return refuse(next, 'malformed', 'malformed');
    const token = match[1];

    const client = tokens?.current.match(token);
    if (client !== undefined) {
      accept(req, client, client);
      return next();
    }
    if (!verifyJwt || !JWT_SHAPE.test(token)) return refuse(next, 'invalid', 'unknown_token');
    // Returned: Express 5 passes a rejection to the error handler rather than losing it.
    return verifyJwt(token).then(
      (subject) => {
        accept(req, subject ?? JWT_LABEL, JWT_LABEL);
        return next();
      },
      (err) => {
        if (!(err instanceof JwtRefusal)) return next(err);
        return refuse(next, 'invalid', err.reason, err.message);
      },
    );
  };
}
