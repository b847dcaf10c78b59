// Why credentials are refused, in words the 401's message and sluice_auth_refused_total use. A
// leaf: what only names a refusal (the metrics, the authentication middleware) need not load jose,
// which auth/jwt.js loads only when a JWT is configured.

/** Every reason a JWT is refused for. */
export const JWT_REFUSAL_REASONS = /** @type {const} */ (['expired', 'not_yet_valid', 'audience', 'issuer', 'claim', 'signature', 'algorithm', 'unknown_key', 'jwks_unavailable', 'malformed', 'role']);

/** Every reason a request is refused for: sluice_auth_refused_total's label, each exported from the start. */
export const AUTH_REFUSAL_REASONS = /** @type {const} */ (['missing', 'malformed', 'unknown_token', ...JWT_REFUSAL_REASONS]);

/**
 * Why a JWT was refused: the 401's message, naming no secret and quoting nothing of the token, and
 * a fixed word for sluice_auth_refused_total (`jwks_unavailable`: the key set could not be fetched,
 * still a 401, since the token could not be verified).
 */
export class JwtRefusal extends Error {
  /** @param {string} message @param {typeof JWT_REFUSAL_REASONS[number]} reason  a metric label: a short fixed word */
  constructor(message, reason) {
    super(message);
    this.name = 'JwtRefusal';
    this.reason = reason;
  }
}
